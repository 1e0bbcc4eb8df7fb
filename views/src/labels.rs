//! Boundary labelling: label boxes in a ring along the image border, joined to their
//! anchors by straight leaders, assigned in angular order so that leaders rarely cross,
//! then untangled by swapping the slots of crossing pairs.

/// An axis-aligned box in pixels: `[x0, y0, x1, y1]`.
pub type Rect = [f64; 4];

pub fn intersects(a: &Rect, b: &Rect) -> bool {
    a[0] < b[2] && b[0] < a[2] && a[1] < b[3] && b[1] < a[3]
}

/// A label that wants a place.
#[derive(Debug, Clone)]
pub struct Request {
    pub id: String,
    pub anchor: (f64, f64),
    /// Larger is placed first when there is not room for everything.
    pub priority: f64,
}

/// A label with its place.
#[derive(Debug, Clone)]
pub struct Placed {
    pub id: String,
    pub rect: Rect,
    pub anchor: (f64, f64),
    /// Where the leader meets the box.
    pub port: (f64, f64),
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    rect: Rect,
    port: (f64, f64),
}

/// Lay out labels of size `box_w` x `box_h` around a `width` x `height` image, keeping
/// clear of `keep_out` (the part, the legend). Returns the placed labels and the IDs that
/// found no room.
pub fn layout(
    requests: &[Request],
    box_w: f64,
    box_h: f64,
    width: f64,
    height: f64,
    keep_out: &[Rect],
) -> (Vec<Placed>, Vec<String>) {
    let center = (width / 2.0, height / 2.0);
    let slots = ring_slots(box_w, box_h, width, height, keep_out);
    let mut order: Vec<&Request> = requests.iter().collect();
    order.sort_by(|a, b| b.priority.total_cmp(&a.priority).then_with(|| a.id.cmp(&b.id)));
    let (chosen, dropped) = order.split_at(order.len().min(slots.len()));
    let mut no_room: Vec<String> = dropped.iter().map(|r| r.id.clone()).collect();
    no_room.sort();
    if chosen.is_empty() {
        return (Vec::new(), no_room);
    }

    let angle = |p: (f64, f64)| (p.1 - center.1).atan2(p.0 - center.0);
    let mut anchors: Vec<&Request> = chosen.to_vec();
    anchors.sort_by(|a, b| angle(a.anchor).total_cmp(&angle(b.anchor)).then_with(|| a.id.cmp(&b.id)));
    let mut ring: Vec<Slot> = slots;
    ring.sort_by(|a, b| angle(a.port).total_cmp(&angle(b.port)));

    // Cut the circle where the anchors leave their widest angular gap, so the
    // order-preserving assignment below does not have to wrap around.
    let n = anchors.len();
    let mut cut = 0;
    let mut widest = f64::NEG_INFINITY;
    for i in 0..n {
        let a = angle(anchors[i].anchor);
        let b = angle(anchors[(i + 1) % n].anchor) + if i + 1 == n { std::f64::consts::TAU } else { 0.0 };
        if b - a > widest {
            widest = b - a;
            cut = (i + 1) % n;
        }
    }
    anchors.rotate_left(cut);
    let gap_mid = angle(anchors[n - 1].anchor) + widest / 2.0;
    let gap_mid = (gap_mid + std::f64::consts::PI).rem_euclid(std::f64::consts::TAU) - std::f64::consts::PI;
    let first_slot = ring.iter().position(|s| angle(s.port) >= gap_mid).unwrap_or(0);
    ring.rotate_left(first_slot);

    let assignment = assign_in_order(&anchors, &ring);
    let mut placed: Vec<Placed> = anchors
        .iter()
        .zip(assignment)
        .map(|(r, s)| Placed { id: r.id.clone(), rect: ring[s].rect, anchor: r.anchor, port: ring[s].port })
        .collect();
    untangle(&mut placed);
    (placed, no_room)
}

/// Order-preserving assignment of anchors to slots minimising total leader length:
/// anchor i goes to a slot after anchor i-1's (dynamic programming, O(n m)).
fn assign_in_order(anchors: &[&Request], slots: &[Slot]) -> Vec<usize> {
    let (n, m) = (anchors.len(), slots.len());
    let dist = |i: usize, j: usize| {
        let (a, p) = (anchors[i].anchor, slots[j].port);
        ((a.0 - p.0).powi(2) + (a.1 - p.1).powi(2)).sqrt()
    };
    // cost[i][j]: best cost of placing anchors 0..=i with anchor i in slot j.
    let mut cost = vec![vec![f64::INFINITY; m]; n];
    let mut from = vec![vec![usize::MAX; m]; n];
    for (j, c) in cost[0].iter_mut().enumerate() {
        *c = dist(0, j);
    }
    for i in 1..n {
        let mut best = f64::INFINITY;
        let mut best_j = usize::MAX;
        for j in 1..m {
            if cost[i - 1][j - 1] < best {
                best = cost[i - 1][j - 1];
                best_j = j - 1;
            }
            if best.is_finite() {
                cost[i][j] = best + dist(i, j);
                from[i][j] = best_j;
            }
        }
    }
    let mut j = (0..m).min_by(|&a, &b| cost[n - 1][a].total_cmp(&cost[n - 1][b])).unwrap_or(0);
    let mut out = vec![0; n];
    for i in (0..n).rev() {
        out[i] = j;
        if i > 0 {
            j = from[i][j];
        }
    }
    out
}

fn segments_cross(a: ((f64, f64), (f64, f64)), b: ((f64, f64), (f64, f64))) -> bool {
    let orient = |p: (f64, f64), q: (f64, f64), r: (f64, f64)| (q.0 - p.0) * (r.1 - p.1) - (q.1 - p.1) * (r.0 - p.0);
    let (d1, d2) = (orient(b.0, b.1, a.0), orient(b.0, b.1, a.1));
    let (d3, d4) = (orient(a.0, a.1, b.0), orient(a.0, a.1, b.1));
    d1 * d2 < 0.0 && d3 * d4 < 0.0
}

fn leader(p: &Placed) -> ((f64, f64), (f64, f64)) {
    (p.anchor, p.port)
}

/// Number of leader pairs that cross.
pub fn crossings(placed: &[Placed]) -> usize {
    let mut count = 0;
    for i in 0..placed.len() {
        for j in i + 1..placed.len() {
            if segments_cross(leader(&placed[i]), leader(&placed[j])) {
                count += 1;
            }
        }
    }
    count
}

/// Swap the slots of crossing leaders while that reduces the number of crossings.
fn untangle(placed: &mut [Placed]) {
    let crossings_of = |placed: &[Placed], i: usize| {
        (0..placed.len()).filter(|&k| k != i && segments_cross(leader(&placed[i]), leader(&placed[k]))).count()
    };
    for _ in 0..50 {
        let mut improved = false;
        for i in 0..placed.len() {
            for j in i + 1..placed.len() {
                if !segments_cross(leader(&placed[i]), leader(&placed[j])) {
                    continue;
                }
                let before = crossings_of(placed, i) + crossings_of(placed, j);
                swap_slots(placed, i, j);
                let after = crossings_of(placed, i) + crossings_of(placed, j);
                if after < before {
                    improved = true;
                } else {
                    swap_slots(placed, i, j);
                }
            }
        }
        if !improved {
            break;
        }
    }
}

fn swap_slots(placed: &mut [Placed], i: usize, j: usize) {
    let (ri, pi) = (placed[i].rect, placed[i].port);
    placed[i].rect = placed[j].rect;
    placed[i].port = placed[j].port;
    placed[j].rect = ri;
    placed[j].port = pi;
}

/// Slots along the four sides, clear of the keep-out boxes.
fn ring_slots(w: f64, h: f64, width: f64, height: f64, keep_out: &[Rect]) -> Vec<Slot> {
    const MARGIN: f64 = 3.0;
    const GAP: f64 = 2.0;
    let mut slots = Vec::new();
    let mut push = |rect: Rect, port: (f64, f64)| {
        let inside = rect[0] >= 0.0 && rect[1] >= 0.0 && rect[2] <= width && rect[3] <= height;
        if inside && !keep_out.iter().any(|k| intersects(&rect, k)) {
            slots.push(Slot { rect, port });
        }
    };
    // Columns on the left and right, between the top and bottom rows.
    let mut y = MARGIN + h + GAP;
    while y + h <= height - MARGIN - h - GAP {
        push([MARGIN, y, MARGIN + w, y + h], (MARGIN + w, y + h / 2.0));
        push([width - MARGIN - w, y, width - MARGIN, y + h], (width - MARGIN - w, y + h / 2.0));
        y += h + GAP;
    }
    // Rows along the top and bottom.
    let mut x = MARGIN;
    while x + w <= width - MARGIN {
        push([x, MARGIN, x + w, MARGIN + h], (x + w / 2.0, MARGIN + h));
        push([x, height - MARGIN - h, x + w, height - MARGIN], (x + w / 2.0, height - MARGIN - h));
        x += w + GAP;
    }
    slots
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requests(points: &[(f64, f64)]) -> Vec<Request> {
        points
            .iter()
            .enumerate()
            .map(|(i, &a)| Request { id: format!("E{}", i + 1), anchor: a, priority: 1.0 })
            .collect()
    }

    #[test]
    fn labels_fit_the_image_do_not_overlap_and_leaders_do_not_cross() {
        // Anchors on a ring around the centre, like the edges of a part.
        let points: Vec<(f64, f64)> = (0..40)
            .map(|i| {
                let a = f64::from(i) * 0.37;
                (250.0 + 110.0 * a.cos() * (1.0 + 0.2 * (3.0 * a).sin()), 250.0 + 90.0 * a.sin())
            })
            .collect();
        let part = [120.0, 140.0, 380.0, 360.0];
        let (placed, no_room) = layout(&requests(&points), 30.0, 14.0, 500.0, 500.0, &[part]);
        assert!(no_room.is_empty());
        assert_eq!(placed.len(), 40);
        for (i, a) in placed.iter().enumerate() {
            assert!(a.rect[0] >= 0.0 && a.rect[1] >= 0.0 && a.rect[2] <= 500.0 && a.rect[3] <= 500.0);
            assert!(!intersects(&a.rect, &part));
            for b in &placed[i + 1..] {
                assert!(!intersects(&a.rect, &b.rect), "{} and {} overlap", a.id, b.id);
            }
        }
        assert_eq!(crossings(&placed), 0);
    }

    #[test]
    fn without_room_the_least_important_labels_are_dropped() {
        let mut r = requests(&[(250.0, 250.0); 500]);
        r[0].priority = 10.0;
        let (placed, no_room) = layout(&r, 30.0, 14.0, 200.0, 200.0, &[]);
        assert!(placed.iter().any(|p| p.id == "E1"), "the most important label is placed");
        assert_eq!(placed.len() + no_room.len(), 500);
        assert!(!no_room.is_empty());
    }
}
