//! A k-d tree for nearest-neighbour distances between surface samples, with a tight
//! bounding box per node.
//!
//! Why not a general-purpose tree: CAD surfaces are mostly planes at axis-aligned, round
//! positions, so thousands of sampled points share a coordinate, and every query point of
//! the other shape sits off those planes (0.1 to 0.3 away in a unit cube). A tree that
//! bounds its cells by split planes cannot bound a cell across such a plane, and each query
//! then visits every cell within its distance: thousands of points. A node box shrunk to
//! its points is flat on a plane, so the same query visits a handful of leaves. Measured on
//! test100 meshes at N = 100,000, one part against another: 0.12-0.21 s per pair with this
//! tree, 1.7-3.9 s with kiddo's `ImmutableKdTree`, 2.4-3.7 s with scipy's cKDTree. The
//! distances are computed exactly as a brute-force search would, so the result does not
//! depend on the tree's shape.

/// Points per leaf.
const LEAF: usize = 12;

#[derive(Debug)]
pub struct KdTree {
    points: Vec<[f64; 3]>,
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, Copy)]
struct Node {
    lo: [f64; 3],
    hi: [f64; 3],
    /// The node's points are points[start..end]; an inner node has two children.
    start: u32,
    end: u32,
    left: u32,
    right: u32,
}

const NONE: u32 = u32::MAX;

impl KdTree {
    pub fn new(points: &[[f64; 3]]) -> KdTree {
        let mut tree = KdTree { points: points.to_vec(), nodes: Vec::with_capacity(2 * points.len() / LEAF + 2) };
        if !points.is_empty() {
            let n = tree.points.len();
            tree.build(0, n);
        }
        tree
    }

    fn build(&mut self, start: usize, end: usize) -> u32 {
        let (lo, hi) = bounds(&self.points[start..end]);
        let index = self.nodes.len() as u32;
        self.nodes.push(Node { lo, hi, start: start as u32, end: end as u32, left: NONE, right: NONE });
        if end - start > LEAF {
            // Split the widest side at the median.
            let axis = (0..3).max_by(|&a, &b| (hi[a] - lo[a]).total_cmp(&(hi[b] - lo[b]))).unwrap_or(0);
            let mid = start + (end - start) / 2;
            self.points[start..end].select_nth_unstable_by(mid - start, |p, q| p[axis].total_cmp(&q[axis]));
            let left = self.build(start, mid);
            let right = self.build(mid, end);
            self.nodes[index as usize].left = left;
            self.nodes[index as usize].right = right;
        }
        index
    }

    /// Squared distance from `q` to the nearest point (infinite for an empty tree).
    pub fn nearest_squared(&self, q: &[f64; 3]) -> f64 {
        let mut best = f64::INFINITY;
        if !self.nodes.is_empty() {
            self.search(0, q, &mut best);
        }
        best
    }

    fn search(&self, node: u32, q: &[f64; 3], best: &mut f64) {
        let n = &self.nodes[node as usize];
        if n.left == NONE {
            for p in &self.points[n.start as usize..n.end as usize] {
                let d = dist2(p, q);
                if d < *best {
                    *best = d;
                }
            }
            return;
        }
        let (a, b) = (n.left, n.right);
        let (da, db) = (box_dist2(&self.nodes[a as usize], q), box_dist2(&self.nodes[b as usize], q));
        let (first, df, second, ds) = if da <= db { (a, da, b, db) } else { (b, db, a, da) };
        if df < *best {
            self.search(first, q, best);
        }
        if ds < *best {
            self.search(second, q, best);
        }
    }
}

fn bounds(points: &[[f64; 3]]) -> ([f64; 3], [f64; 3]) {
    let mut lo = [f64::INFINITY; 3];
    let mut hi = [f64::NEG_INFINITY; 3];
    for p in points {
        for i in 0..3 {
            lo[i] = lo[i].min(p[i]);
            hi[i] = hi[i].max(p[i]);
        }
    }
    (lo, hi)
}

fn dist2(p: &[f64; 3], q: &[f64; 3]) -> f64 {
    let (x, y, z) = (p[0] - q[0], p[1] - q[1], p[2] - q[2]);
    x * x + y * y + z * z
}

fn box_dist2(n: &Node, q: &[f64; 3]) -> f64 {
    let gap = |i: usize| (n.lo[i] - q[i]).max(0.0).max(q[i] - n.hi[i]);
    let (x, y, z) = (gap(0), gap(1), gap(2));
    x * x + y * y + z * z
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator for test data.
    fn lcg(state: &mut u64) -> f64 {
        *state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (*state >> 11) as f64 / (1u64 << 53) as f64
    }

    #[test]
    fn nearest_distances_equal_brute_force_on_planes_and_in_space() {
        let mut s = 42;
        // Points on three axis-aligned planes (many equal coordinates) and in space.
        let mut to = Vec::new();
        for k in 0..3000 {
            let (a, b) = (lcg(&mut s), lcg(&mut s));
            to.push(match k % 4 {
                0 => [0.5, a, b],
                1 => [a, -0.5, b],
                2 => [a, b, 0.25],
                _ => [a, b, lcg(&mut s)],
            });
        }
        to.push(to[7]); // a duplicate
        let tree = KdTree::new(&to);
        for _ in 0..500 {
            let q = [lcg(&mut s) * 2.0 - 1.0, lcg(&mut s) * 2.0 - 1.0, lcg(&mut s) * 2.0 - 1.0];
            let brute = to.iter().map(|p| dist2(p, &q)).fold(f64::INFINITY, f64::min);
            assert_eq!(tree.nearest_squared(&q), brute);
        }
        assert_eq!(tree.nearest_squared(&to[7]), 0.0);
    }

    #[test]
    fn an_empty_tree_is_infinitely_far() {
        assert_eq!(KdTree::new(&[]).nearest_squared(&[0.0; 3]), f64::INFINITY);
    }
}
