//! Pyroscope's flamebearer layout: `names` + `levels`, so existing flamegraph components
//! render our trees.
//!
//! Each level is the row of bars at one depth, left to right. A bar is placed by its x
//! position in ticks (value units), written as the gap after the end of the previous bar
//! of the same level (delta encoding). As in Pyroscope, a node's own `self` width comes
//! first and its children follow it, in tree order, each as wide as its total. A diff
//! carries two such coordinates, the baseline's (left) and the comparison's (right).

use std::collections::HashMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::tree::{Diff, DiffNode};
use crate::tree::{Flamegraph, Node, TreeNode};
use crate::types::ProfileTypeInfo;

/// The response body: `{"version": 1, "flamebearer": {...}, "metadata": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
pub struct FlamebearerProfile {
    pub version: u32,
    pub flamebearer: Flamebearer,
    pub metadata: FlamebearerMetadata,
}

#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Flamebearer {
    pub names: Vec<String>,
    /// One array per depth. Single: 4 numbers per node `[x offset relative to the end of the
    /// previous node in the level, total, self, name index]`. Diff: 7 numbers per node
    /// `[left offset, left total, left self, right offset, right total, right self, name
    /// index]`.
    pub levels: Vec<Vec<i64>>,
    pub num_ticks: i64,
    pub max_self: i64,
    /// Diff only: the baseline's and the comparison's totals.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_ticks: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub right_ticks: Option<i64>,
}

#[derive(Clone, Debug, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct FlamebearerMetadata {
    /// `single` or `double` (a diff).
    pub format: String,
    pub units: String,
    pub name: String,
    pub spy_name: String,
    pub sample_rate: i64,
}

/// `spyName` of every profile we render: the data may come from any agent.
pub const SPY_NAME: &str = "stackhouse";

/// A tree laid out as above: what a flamebearer and Pyroscope's Connect `FlameGraph` carry.
/// The root comes first, alone on level 0, so `names[0]` is its name.
#[derive(Clone, Debug, PartialEq)]
pub struct Levels {
    pub names: Vec<String>,
    pub levels: Vec<Vec<i64>>,
    pub max_self: i64,
}

/// The single layout (4 numbers per node) of a flamegraph's tree.
pub fn levels(root: &Node) -> Levels {
    let (names, levels, max_self) = layout(root);
    Levels {
        names,
        levels,
        max_self,
    }
}

/// The diff layout (7 numbers per node): the baseline left, the comparison right.
pub fn diff_levels(root: &DiffNode) -> Levels {
    let (names, levels, max_self) = layout(root);
    Levels {
        names,
        levels,
        max_self,
    }
}

/// `format=flamebearer`: the JSON Pyroscope's flamegraph components render.
#[derive(Debug)]
pub(super) struct FlamebearerFormat;

impl super::TreeRenderer for FlamebearerFormat {
    fn name(&self) -> &'static str {
        "flamebearer"
    }

    fn content_type(&self) -> &'static str {
        "application/json"
    }

    fn flamegraph(&self, flamegraph: &Flamegraph) -> Vec<u8> {
        to_json(&flamebearer(flamegraph))
    }

    fn diff(&self, diff: &Diff) -> Vec<u8> {
        to_json(&flamebearer_diff(diff))
    }
}

fn to_json(profile: &FlamebearerProfile) -> Vec<u8> {
    // Plain data with string keys: serializing it cannot fail.
    serde_json::to_vec(profile).unwrap_or_default()
}

/// The flamegraph as a `single` flamebearer; `numTicks` is the root total.
pub fn flamebearer(flamegraph: &Flamegraph) -> FlamebearerProfile {
    let Levels {
        names,
        levels,
        max_self,
    } = levels(&flamegraph.root);
    FlamebearerProfile {
        version: 1,
        flamebearer: Flamebearer {
            names,
            levels,
            num_ticks: flamegraph.root.total,
            max_self,
            left_ticks: None,
            right_ticks: None,
        },
        metadata: metadata("single", &flamegraph.kind, flamegraph.period),
    }
}

/// The diff as a `double` flamebearer: the baseline is the left side, the comparison the
/// right. `numTicks` is the sum of both totals, as Pyroscope's diff sends it.
pub fn flamebearer_diff(diff: &Diff) -> FlamebearerProfile {
    let Levels {
        names,
        levels,
        max_self,
    } = diff_levels(&diff.root);
    let (left, right) = (diff.root.baseline_total, diff.root.comparison_total);
    FlamebearerProfile {
        version: 1,
        flamebearer: Flamebearer {
            names,
            levels,
            num_ticks: left + right,
            max_self,
            left_ticks: Some(left),
            right_ticks: Some(right),
        },
        metadata: metadata("double", &diff.kind, diff.period),
    }
}

/// A tree node drawn as one bar per side.
trait Bar: TreeNode {
    /// Sides per node: 1 for a flamegraph, 2 for a diff.
    const SIDES: usize;
    fn name(&self) -> &str;
    /// `(total, self)` of one side.
    fn side(&self, side: usize) -> (i64, i64);
}

impl Bar for Node {
    const SIDES: usize = 1;

    fn name(&self) -> &str {
        &self.name
    }

    fn side(&self, _: usize) -> (i64, i64) {
        (self.total, self.self_value)
    }
}

impl Bar for DiffNode {
    const SIDES: usize = 2;

    fn name(&self) -> &str {
        &self.name
    }

    fn side(&self, side: usize) -> (i64, i64) {
        match side {
            0 => (self.baseline_total, self.baseline_self),
            _ => (self.comparison_total, self.comparison_self),
        }
    }
}

/// `names`, `levels` and `maxSelf` of a tree. Each node adds, per side, `[offset, total,
/// self]`, then its name index.
fn layout<T: Bar>(root: &T) -> (Vec<String>, Vec<Vec<i64>>, i64) {
    let mut names: Vec<String> = Vec::new();
    let mut name_ids: HashMap<&str, i64> = HashMap::new();
    let mut levels: Vec<Vec<i64>> = Vec::new();
    // Per level and side: where the previous bar of the level ended.
    let mut ends: Vec<[i64; 2]> = Vec::new();
    let mut max_self = 0;
    // Pre-order with children pushed in reverse, so each level fills left to right. An
    // explicit stack: call paths can be deeper than the thread's stack allows recursion.
    let mut pending: Vec<(&T, usize, [i64; 2])> = vec![(root, 0, [0, 0])];
    while let Some((node, depth, x)) = pending.pop() {
        if depth == levels.len() {
            levels.push(Vec::new());
            ends.push([0, 0]);
        }
        let mut cursor = x;
        for side in 0..T::SIDES {
            let (total, self_value) = node.side(side);
            levels[depth].extend([x[side] - ends[depth][side], total, self_value]);
            ends[depth][side] = x[side] + total;
            max_self = max_self.max(self_value);
            cursor[side] += self_value;
        }
        let next_id = names.len() as i64;
        let name_id = *name_ids.entry(node.name()).or_insert_with(|| {
            names.push(node.name().to_string());
            next_id
        });
        levels[depth].push(name_id);
        let mut children = Vec::with_capacity(node.children().len());
        for child in node.children() {
            children.push((child, depth + 1, cursor));
            for (side, c) in cursor.iter_mut().enumerate().take(T::SIDES) {
                *c += child.side(side).0;
            }
        }
        pending.extend(children.into_iter().rev());
    }
    (names, levels, max_self)
}

/// What Pyroscope's components need to print values: `units` names the formatter, and for
/// `samples` the ticks are divided by `sampleRate` to show seconds.
///
/// - sample unit `bytes` → `bytes`;
/// - sample unit `nanoseconds` → `nanoseconds`, sample rate 1e9 (one tick is a nanosecond,
///   so tick counts divided by the rate are seconds, also in Pyroscope's fallback
///   formatter);
/// - sample unit `count`: object counts (`*_objects`, `objects`) → `objects`, goroutine
///   counts → `goroutines`, anything else (CPU samples, ...) → `samples`, with the rate the
///   period gives when it is a duration (a 10 ms period is 100 samples per second), else 0
///   (unknown: we do not guess Pyroscope's usual 100);
/// - any other unit is passed through with rate 0.
fn metadata(format: &str, kind: &ProfileTypeInfo, period: i64) -> FlamebearerMetadata {
    const NANOS_PER_SECOND: i64 = 1_000_000_000;
    let (units, sample_rate) = match kind.sample_unit.as_str() {
        "bytes" => ("bytes", 0),
        "nanoseconds" => ("nanoseconds", NANOS_PER_SECOND),
        "count" => {
            let sample_type = kind.sample_type.as_str();
            if sample_type == "objects" || sample_type.ends_with("_objects") {
                ("objects", 0)
            } else if sample_type.starts_with("goroutine") {
                ("goroutines", 0)
            } else {
                ("samples", samples_per_second(&kind.period_unit, period))
            }
        }
        other => (other, 0),
    };
    FlamebearerMetadata {
        format: format.to_string(),
        units: units.to_string(),
        name: kind.profile_type.clone(),
        spy_name: SPY_NAME.to_string(),
        sample_rate,
    }
}

/// Samples per second when one sample stands for `period` of `unit`; 0 when unknown.
fn samples_per_second(unit: &str, period: i64) -> i64 {
    let units_per_second: i64 = match unit {
        "nanoseconds" => 1_000_000_000,
        "microseconds" => 1_000_000,
        "milliseconds" => 1_000,
        "seconds" => 1,
        _ => return 0,
    };
    if period <= 0 {
        return 0;
    }
    // Rounded: a 3 ms period gives 333.
    (units_per_second + period / 2) / period
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::model::ProfileType;

    use super::*;
    use crate::tree::{OTHER_NAME, TreeBuilder};

    /// A node read back from a flamebearer: per side `(x, total, self)`, absolute x.
    #[derive(Debug, Clone, PartialEq)]
    struct Decoded {
        name: String,
        sides: Vec<(i64, i64, i64)>,
        children: Vec<Decoded>,
    }

    /// `(name, per side (total, self))` in pre-order: what the source tree says.
    fn expected<T: Bar>(node: &T, out: &mut Vec<(String, Vec<(i64, i64)>)>) {
        out.push((
            node.name().to_string(),
            (0..T::SIDES).map(|s| node.side(s)).collect(),
        ));
        node.children().iter().for_each(|c| expected(c, out));
    }

    fn preorder(node: &Decoded, out: &mut Vec<(String, Vec<(i64, i64)>)>) {
        out.push((
            node.name.clone(),
            node.sides
                .iter()
                .map(|&(_, total, self_value)| (total, self_value))
                .collect(),
        ));
        node.children.iter().for_each(|c| preorder(c, out));
    }

    /// Decodes the levels, checking the layout invariants on the way, and returns the
    /// root rebuilt as a tree.
    fn decode(fb: &Flamebearer, sides: usize) -> Decoded {
        let width = 3 * sides + 1;
        let mut names = fb.names.clone();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), fb.names.len(), "names are deduplicated");
        // Absolute positions, level by level.
        let mut rows: Vec<Vec<Decoded>> = Vec::new();
        for (depth, level) in fb.levels.iter().enumerate() {
            assert_eq!(level.len() % width, 0, "level {depth} length");
            let mut ends = vec![0; sides];
            let mut row = Vec::new();
            for bar in level.chunks(width) {
                let mut decoded = Decoded {
                    name: fb.names[usize::try_from(bar[width - 1]).unwrap()].clone(),
                    sides: Vec::new(),
                    children: Vec::new(),
                };
                for side in 0..sides {
                    let (offset, total, self_value) = (bar[3 * side], bar[3 * side + 1], bar[3 * side + 2]);
                    assert!(offset >= 0, "bars of level {depth} do not overlap");
                    let x = ends[side] + offset;
                    ends[side] = x + total;
                    decoded.sides.push((x, total, self_value));
                }
                row.push(decoded);
            }
            rows.push(row);
        }
        assert_eq!(rows[0].len(), 1, "level 0 is the root alone");
        // Attach each bar to the bar above whose children's span holds it; bars of one
        // level come in the order of their parents.
        while rows.len() > 1 {
            let children = rows.pop().unwrap();
            let parents = rows.last_mut().unwrap();
            let mut p = 0;
            for child in children {
                let fits = |parent: &Decoded| {
                    parent
                        .sides
                        .iter()
                        .zip(&child.sides)
                        .all(|(&(px, pt, ps), &(cx, ct, _))| cx >= px + ps && cx + ct <= px + pt)
                };
                while !fits(&parents[p]) {
                    p += 1;
                    assert!(p < parents.len(), "{} lies within a parent", child.name);
                }
                parents[p].children.push(child);
            }
        }
        let root = rows.pop().unwrap().pop().unwrap();
        check_sums(&root);
        let max_self = collect_selfs(&root).into_iter().max().unwrap();
        assert_eq!(fb.max_self, max_self.max(0));
        root
    }

    fn check_sums(node: &Decoded) {
        for (side, &(_, total, self_value)) in node.sides.iter().enumerate() {
            let children: i64 = node.children.iter().map(|c| c.sides[side].1).sum();
            assert_eq!(total, self_value + children, "{} side {side}", node.name);
        }
        node.children.iter().for_each(check_sums);
    }

    fn collect_selfs(node: &Decoded) -> Vec<i64> {
        let mut out: Vec<i64> = node.sides.iter().map(|s| s.2).collect();
        node.children.iter().for_each(|c| out.extend(collect_selfs(c)));
        out
    }

    fn tree(paths: &[(&[&str], i64)]) -> Node {
        let mut b = TreeBuilder::new();
        for (path, value) in paths {
            b.add_path(path, *value);
        }
        b.build()
    }

    fn flamegraph(profile_type: &str, period: i64, root: Node) -> Flamegraph {
        Flamegraph::new(ProfileType::parse(profile_type).unwrap(), period, root)
    }

    fn baseline_tree() -> Node {
        tree(&[
            (&["main", "work", "leaf"], 10),
            (&["main", "work"], 3),
            (&["main", "idle"], 5),
            (&["main", "leaf"], 2),
            (&["gc", "sweep"], 4),
            (&[], 6),
        ])
    }

    #[test]
    fn single_layout_round_trips() {
        let fg = flamegraph("samples:count:cpu:nanoseconds", 10_000_000, baseline_tree());
        let out = flamebearer(&fg);
        assert_eq!(out.version, 1);
        let fb = &out.flamebearer;
        // 10 + 3 + 5 + 2 + 4 + 6, summed from the inputs.
        assert_eq!(fb.num_ticks, 30);
        assert_eq!((fb.left_ticks, fb.right_ticks), (None, None));
        assert_eq!(fb.max_self, 10);
        let root = decode(fb, 1);
        assert_eq!(root.name, "total");
        assert_eq!(root.sides, [(0, 30, 6)]);
        let mut want = Vec::new();
        expected(&fg.root, &mut want);
        let mut got = Vec::new();
        preorder(&root, &mut got);
        assert_eq!(got, want);
        // "leaf" appears twice in the tree, once in names.
        assert_eq!(fb.names.iter().filter(|n| *n == "leaf").count(), 1);
        // The root's self comes first: main starts after it.
        assert_eq!(fb.levels[0], [0, 30, 6, 0]);
        assert_eq!(&fb.levels[1][..3], [6, 20, 0]);
    }

    #[test]
    fn single_layout_of_a_truncated_and_an_empty_tree() {
        let mut fg = flamegraph("samples:count:cpu:nanoseconds", 0, baseline_tree());
        fg.truncate(3);
        let root = decode(&flamebearer(&fg).flamebearer, 1);
        assert!(root.children.iter().any(|c| c.name == OTHER_NAME));
        assert_eq!(root.sides, [(0, 30, 6)]);
        let empty = flamebearer(&Flamegraph::empty(ProfileType::default(), 0));
        assert_eq!(empty.flamebearer.levels, [[0, 0, 0, 0]]);
        assert_eq!((empty.flamebearer.num_ticks, empty.flamebearer.max_self), (0, 0));
    }

    #[test]
    fn diff_layout_round_trips() {
        let comparison = tree(&[
            (&["main", "work", "leaf"], 4),
            (&["main", "new"], 7),
            (&["gc"], 1),
        ]);
        let baseline = flamegraph("samples:count:cpu:nanoseconds", 10_000_000, baseline_tree());
        let comparison = flamegraph("samples:count:cpu:nanoseconds", 10_000_000, comparison);
        let diff = Diff::new(&baseline, &comparison);
        let out = flamebearer_diff(&diff);
        let fb = &out.flamebearer;
        assert_eq!((fb.left_ticks, fb.right_ticks), (Some(30), Some(12)));
        assert_eq!(fb.num_ticks, 42);
        assert_eq!(fb.max_self, 10);
        assert_eq!(out.metadata.format, "double");
        let root = decode(fb, 2);
        assert_eq!(root.sides, [(0, 30, 6), (0, 12, 0)]);
        let mut want = Vec::new();
        expected(&diff.root, &mut want);
        let mut got = Vec::new();
        preorder(&root, &mut got);
        assert_eq!(got, want);
        // "new" exists only on the right: zero width on the left.
        let main = root.children.iter().find(|c| c.name == "main").unwrap();
        let new = main.children.iter().find(|c| c.name == "new").unwrap();
        assert_eq!((new.sides[0].1, new.sides[1].1), (0, 7));
    }

    #[test]
    fn metadata_names_units_and_rate() {
        let meta = |id: &str, period| flamebearer(&flamegraph(id, period, baseline_tree())).metadata;
        let cpu = meta("samples:count:cpu:nanoseconds", 10_000_000);
        assert_eq!(
            cpu,
            FlamebearerMetadata {
                format: "single".into(),
                units: "samples".into(),
                name: "samples:count:cpu:nanoseconds".into(),
                spy_name: "stackhouse".into(),
                sample_rate: 100,
            }
        );
        assert_eq!(meta("samples:count:cpu:nanoseconds", 0).sample_rate, 0);
        assert_eq!(meta("samples:count:wall:milliseconds", 3).sample_rate, 333);
        let ns = meta("cpu:nanoseconds:cpu:nanoseconds", 10_000_000);
        assert_eq!(
            (ns.units.as_str(), ns.sample_rate),
            ("nanoseconds", 1_000_000_000)
        );
        let bytes = meta("alloc_space:bytes:space:bytes", 524_288);
        assert_eq!((bytes.units.as_str(), bytes.sample_rate), ("bytes", 0));
        assert_eq!(meta("alloc_objects:count:space:bytes", 524_288).units, "objects");
        assert_eq!(meta("goroutine:count:goroutine:count", 1).units, "goroutines");
        assert_eq!(meta("events:widgets::", 0).units, "widgets");
        let json = serde_json::to_value(flamebearer(&flamegraph(
            "samples:count:cpu:nanoseconds",
            1,
            baseline_tree(),
        )))
        .unwrap();
        for key in ["names", "levels", "numTicks", "maxSelf"] {
            assert!(json["flamebearer"].get(key).is_some(), "{key}");
        }
        assert!(json["flamebearer"].get("leftTicks").is_none());
        for key in ["format", "units", "name", "spyName", "sampleRate"] {
            assert!(json["metadata"].get(key).is_some(), "{key}");
        }
    }
}
