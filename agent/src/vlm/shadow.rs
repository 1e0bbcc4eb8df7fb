//! Calibration of the simulated VLM from a real model (`reconstruct --shadow-gt GT`): an
//! oracle shadows the model, answering every request the model gets from the request and
//! the ground truth, and the differences between the two answers are the errors the model
//! made, recorded in the trace under `observed`. `vision2cad sim-calibrate` counts them into
//! `[sim]` rates.
//!
//! The shadow's answers never reach the harness: it goes on with the model's answer, as
//! without the shadow. What is compared, per call:
//!
//! - Stage 1: the operation (op, mode, extent type: `operation`), each reference slot and
//!   each sketch's plane (`reference`), and each number both answers give (relative error:
//!   `parameter`);
//! - Stage 2: every coordinate of drawings with the same primitives, in view units
//!   (`coordinate`); drawings of other primitives are `drawing` mismatches;
//! - Stage 3: the verdict (`judge`).
//!
//! Once the model's part has drifted from the ground truth, the shadow (tolerant, like the
//! simulated model's oracle) answers for the nearest step it can, so late comparisons of a
//! failing run overstate errors; `sim-calibrate` reports the counts behind every rate.

use serde_json::{Value, json};

use super::{Oracle, Reply, Request, Stage, Vlm, VlmError};
use crate::stage1::reference_slots;

/// A model with an oracle at its shoulder.
pub struct Shadowed {
    model: Box<dyn Vlm>,
    oracle: Oracle,
}

impl std::fmt::Debug for Shadowed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shadowed").field("model", &self.model.name()).finish_non_exhaustive()
    }
}

impl Shadowed {
    pub fn new(model: Box<dyn Vlm>, oracle: Oracle) -> Shadowed {
        Shadowed { model, oracle: oracle.tolerant() }
    }
}

impl Vlm for Shadowed {
    fn name(&self) -> String {
        self.model.name()
    }

    fn answer(&mut self, request: &Request) -> Result<Reply, VlmError> {
        let mut reply = self.model.answer(request)?;
        if request.stage == Stage::DirectCode {
            return Ok(reply);
        }
        let (Ok(ideal), Ok(given)) =
            (self.oracle.answer(request), serde_json::from_str::<Value>(crate::json_text(&reply.text)))
        else {
            reply.observed.push(json!({"stage": request.stage.name(), "kind": "uncompared"}));
            return Ok(reply);
        };
        let Ok(ideal) = serde_json::from_str::<Value>(&ideal.text) else { return Ok(reply) };
        reply.observed = compare(request.stage, &given, &ideal);
        Ok(reply)
    }
}

/// The differences between the model's answer and the oracle's.
pub fn compare(stage: Stage, given: &Value, ideal: &Value) -> Vec<Value> {
    let mut out = Vec::new();
    match stage {
        Stage::Stage1 => {
            let (mut g, mut i) = (given["command"].clone(), ideal["command"].clone());
            let shape = |c: &Value| (c["op"].clone(), c["mode"].clone(), c["extent"]["type"].clone());
            let same_operation = shape(&g) == shape(&i);
            out.push(json!({"stage": "stage1", "kind": "operation", "differs": !same_operation,
                "given": g["op"], "ideal": i["op"]}));
            if !same_operation {
                return out;
            }
            let (gs, gl) = reference_slots(&mut g);
            let (is, il) = reference_slots(&mut i);
            // The sketches the command needs name their planes too.
            let planes = |v: &Value| -> Vec<Value> {
                v["sketches"].as_array().into_iter().flatten().map(|s| s["on"].clone()).collect()
            };
            let (gp, ip) = (planes(given), planes(ideal));
            let pairs = gs.iter().map(|v| &**v).zip(is.iter().map(|v| &**v));
            let pairs = pairs.chain(gl.iter().map(|v| &**v).zip(il.iter().map(|v| &**v))).chain(gp.iter().zip(&ip));
            for (a, b) in pairs {
                out.push(json!({"stage": "stage1", "kind": "reference", "differs": a != b, "given": a, "ideal": b}));
            }
            let mut numbers = Vec::new();
            paired_numbers(&given["command"], &ideal["command"], "", &mut numbers);
            for (path, a, b) in numbers {
                if b != 0.0 {
                    out.push(json!({"stage": "stage1", "kind": "parameter", "where": path, "relative": (a - b) / b}));
                }
            }
        }
        Stage::Stage2 => {
            let types = |v: &Value| -> Vec<Value> {
                v["primitives"].as_array().into_iter().flatten().map(|p| p["type"].clone()).collect()
            };
            if types(given) != types(ideal) {
                out.push(json!({"stage": "stage2", "kind": "drawing", "differs": true,
                    "given": types(given), "ideal": types(ideal)}));
                return out;
            }
            let mut numbers = Vec::new();
            paired_numbers(&given["primitives"], &ideal["primitives"], "", &mut numbers);
            let deltas: Vec<f64> = numbers.iter().map(|(_, a, b)| a - b).collect();
            out.push(json!({"stage": "stage2", "kind": "coordinate", "deltas": deltas}));
        }
        Stage::Stage3 => {
            let differs = given["verdict"] != ideal["verdict"];
            out.push(json!({"stage": "stage3", "kind": "judge", "differs": differs,
                "given": given["verdict"], "ideal": ideal["verdict"]}));
        }
        Stage::DirectCode => {}
    }
    out
}

/// Every number at the same place in both values, with its path.
fn paired_numbers(a: &Value, b: &Value, path: &str, out: &mut Vec<(String, f64, f64)>) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            if let (Some(x), Some(y)) = (x.as_f64(), y.as_f64()) {
                out.push((path.to_string(), x, y));
            }
        }
        (Value::Array(xs), Value::Array(ys)) if xs.len() == ys.len() => {
            for (k, (x, y)) in xs.iter().zip(ys).enumerate() {
                paired_numbers(x, y, &format!("{path}[{k}]"), out);
            }
        }
        (Value::Object(xs), Value::Object(ys)) => {
            for (k, x) in xs {
                if let Some(y) = ys.get(k) {
                    paired_numbers(x, y, &if path.is_empty() { k.clone() } else { format!("{path}.{k}") }, out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wrong_reference_and_a_wrong_depth_are_observed() {
        let given = json!({"command": {"op": "extrude", "mode": "add", "profile": "S2", "extent": {"type": "one_side", "depth": 11.0}}});
        let ideal = json!({"command": {"op": "extrude", "mode": "add", "profile": "S2", "extent": {"type": "one_side", "depth": 10.0}}});
        let seen = compare(Stage::Stage1, &given, &ideal);
        assert_eq!(seen[0]["differs"], false, "the same operation");
        let depth = seen.iter().find(|e| e["kind"] == "parameter").expect("the depth");
        assert!((depth["relative"].as_f64().expect("number") - 0.1).abs() < 1e-12);

        let given = json!({"command": {"op": "sketch", "on": "F3"}});
        let ideal = json!({"command": {"op": "sketch", "on": "F5"}});
        let seen = compare(Stage::Stage1, &given, &ideal);
        assert!(seen.iter().any(|e| e["kind"] == "reference" && e["differs"] == true), "{seen:?}");
        let cut = json!({"command": {"op": "extrude", "mode": "cut", "extent": {"type": "one_side", "depth": 10.0}}});
        let seen = compare(Stage::Stage1, &cut, &ideal);
        assert_eq!((seen.len(), &seen[0]["differs"]), (1, &json!(true)), "another operation: nothing else compared");
    }

    #[test]
    fn drawings_compare_point_by_point_and_verdicts_by_value() {
        let given = json!({"primitives": [{"type": "line", "start": [0.1, 0.2], "end": [0.5, 0.2]}]});
        let ideal = json!({"primitives": [{"type": "line", "start": [0.1, 0.25], "end": [0.5, 0.2]}]});
        let seen = compare(Stage::Stage2, &given, &ideal);
        let deltas: Vec<f64> = seen[0]["deltas"].as_array().expect("deltas").iter().filter_map(Value::as_f64).collect();
        assert_eq!(deltas.len(), 4);
        assert!((deltas.iter().map(|d| d.abs()).sum::<f64>() - 0.05).abs() < 1e-12, "{deltas:?}");
        let circle = json!({"primitives": [{"type": "circle", "center": [0.1, 0.2], "radius": 0.1}]});
        assert_eq!(compare(Stage::Stage2, &circle, &ideal)[0]["kind"], "drawing");
        let seen = compare(Stage::Stage3, &json!({"verdict": "accept"}), &json!({"verdict": "reject"}));
        assert_eq!(seen[0]["differs"], true);
    }
}
