//! `partition`: group bindings into fused `Primitive` functions, one per tuning task, by the
//! rules of TVM Relax's FuseOps (src/relax/transform/fuse_ops.cc with the shared
//! GraphPartitioner of src/relay/analysis/graph_partitioner.cc).
//!
//! # The algorithm
//!
//! 1. **Dataflow graph.** Every op binding of a function is a node whose pattern is its op's
//!    TVM pattern (the registry's `pattern`, which mirrors what AnnotateTIROpPattern gives the
//!    legalized PrimFunc; see [`binding_pattern`] for the one shape-dependent case). Every result of a multi-result binding (`split`) gets its own
//!    Injective node, as Relax's `TupleGetItem` does. An edge producer -> consumer carries the
//!    *consumer's* pattern. Calls of other functions are Opaque. Parameters and constants are
//!    not nodes: TVM gives them Opaque leaf nodes that never fuse, and constants are copied
//!    into every group that uses them (TVM keeps them inline in the fused function).
//!    Function results are "extern references": they end every path, so nothing fuses
//!    *through* them (they may still be the sink a producer fuses into).
//! 2. **Post-dominator tree.** Walking nodes in reverse topological order, a node's parent is
//!    the least common ancestor, in the tree built so far, of all its consumers; the node's
//!    `dom pattern` is the most general (largest) pattern met on the way: the edges to its
//!    consumers and the tree nodes passed while climbing to the ancestor.
//! 3. **Fusion, three phases over nodes in topological order.** A node (or rather its group)
//!    tries to join the group of its immediate post-dominator:
//!    - phase 0, an OutEWiseFusable anchor (conv2d, matmul, ...) fuses into its post-dominator
//!      when the dom pattern is ElemWise and every node on every path to it is at most
//!      Broadcast: `conv2d -> add -> relu` becomes one group;
//!    - phases 0 and 1, an ElemWise/Broadcast node fuses into a post-dominator whose dom
//!      pattern is at most Injective or is CommReduce, when the paths are at most Injective
//!      and the sink's group is Broadcast, Injective, CommReduce or OutEWiseFusable;
//!    - phase 1, an Injective node fuses along all-injective paths (after phase 0, so that
//!      anchors finish absorbing their elementwise tails first);
//!    - CommReduce and Opaque nodes never fuse into their consumers (reductions only absorb
//!      producers), and Opaque nodes stand alone.
//!
//!    The phases are greedy, so the visiting order matters where two producers compete for
//!    one consumer. TVM visits program order; by default we visit a canonical topological
//!    order instead ([`FusionOrder`]), so that re-exports of a model in another binding
//!    order give the same tasks. `partition{order=program}` reproduces TVM exactly.
//!
//!    A fusion merges every node on every path from the node to the sink into the sink's
//!    group. It is refused when the merged group would exceed `max-depth` nodes (TVM's
//!    `kMaxFusedOps`, 256).
//! 4. **Outlining.** Each group becomes a function with `Primitive = true` whose parameters
//!    are the values it reads from outside (in order of first use), whose results are the
//!    values used outside it, and which is called from the original function in a
//!    topological order of the groups. Every op ends up in some group, so ops TVM leaves
//!    unfused become single-op tasks.

use crate::pass::{OptionDefault, OptionSpec, Pass, PassError, PassInfo, PassOptions};
use smallvec::SmallVec;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use tgc_ir::{Attr, Binding, Callee, Function, Module, OpPattern, ValueId};

/// TVM's default limit on the number of nodes in one fused group (`kMaxFusedOps`).
pub const DEFAULT_MAX_DEPTH: usize = 256;

pub static INFO: PassInfo = PassInfo {
    name: "partition",
    summary: "Group bindings into fused Primitive functions (tuning tasks) by TVM FuseOps rules",
    options: &[
        OptionSpec {
            name: "max-depth",
            default: OptionDefault::Int(DEFAULT_MAX_DEPTH as i64),
            help: "most nodes in one fused group (TVM's kMaxFusedOps)",
        },
        OptionSpec {
            name: "order",
            default: OptionDefault::Str("canonical"),
            help: "order fusion visits bindings in: canonical (independent of binding order) or program (TVM's)",
        },
    ],
    create: |o: &PassOptions| {
        let depth = o.int("max-depth");
        if depth < 1 {
            return Err(format!(
                "option 'max-depth' of pass 'partition' must be at least 1, got {depth}"
            ));
        }
        let order = o.str("order").parse()?;
        Ok(Box::new(Partition {
            max_depth: depth as usize,
            order,
        }))
    },
};

/// The order in which fusion visits the bindings of a function. FuseOps' greedy phases are
/// order-sensitive: when two OutEWiseFusable producers (the two convolutions of a ResNet
/// downsampling block) feed one `add`, the producer visited first absorbs it, and the other
/// stays alone. TVM visits program order, so the same model exported in another topological
/// order splits into other tasks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FusionOrder {
    /// A topological order that depends only on the dataflow graph: a post-order walk from
    /// the function's results that visits the deepest operand first (longest path from the
    /// inputs, then [`tgc_canonicalize::canon::dataflow_colors`], then operand position). So
    /// the longer branch claims a shared consumer: the main path of a residual block, whose
    /// convolution then has the same task as in the blocks without a shortcut convolution.
    #[default]
    Canonical,
    /// Program order, exactly as TVM's FuseOps (for agreement with TVM's own partition).
    Program,
}

impl std::str::FromStr for FusionOrder {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "canonical" => Ok(FusionOrder::Canonical),
            "program" => Ok(FusionOrder::Program),
            other => Err(format!(
                "option 'order' of pass 'partition' must be canonical or program, got '{other}'"
            )),
        }
    }
}

/// The partition pass.
pub struct Partition {
    pub max_depth: usize,
    pub order: FusionOrder,
}

impl Default for Partition {
    fn default() -> Self {
        Partition {
            max_depth: DEFAULT_MAX_DEPTH,
            order: FusionOrder::default(),
        }
    }
}

/// The order in which fusion visits the bindings of `f` (indices into `f.bindings`).
fn visit_order(f: &Function, order: FusionOrder) -> Vec<usize> {
    if order == FusionOrder::Program {
        return (0..f.bindings.len()).collect();
    }
    let mut def: HashMap<ValueId, usize> = HashMap::with_capacity(f.bindings.len());
    let mut depth = vec![0u32; f.bindings.len()];
    for (bi, b) in f.bindings.iter().enumerate() {
        depth[bi] = b
            .operands
            .iter()
            .filter_map(|v| def.get(v))
            .map(|&d| depth[d] + 1)
            .max()
            .unwrap_or(0);
        def.extend(b.results.iter().map(|r| (*r, bi)));
    }
    let colors = tgc_canonicalize::canon::dataflow_colors(f);
    let rank = |bi: usize| (Reverse(depth[bi]), colors[bi]);
    // The producers of each binding's operands, deepest first (duplicates are harmless: a
    // visited binding is skipped).
    let producers: Vec<SmallVec<[usize; 4]>> = f
        .bindings
        .iter()
        .map(|b| {
            let mut p: SmallVec<[usize; 4]> = b
                .operands
                .iter()
                .filter_map(|v| def.get(v).copied())
                .collect();
            p.sort_by_key(|&d| rank(d));
            p
        })
        .collect();
    // Roots: the producers of the results in order, then bindings no result depends on.
    let mut roots: Vec<usize> = f
        .results
        .iter()
        .filter_map(|r| def.get(r).copied())
        .collect();
    let mut rest: Vec<usize> = (0..f.bindings.len()).collect();
    rest.sort_by_key(|&bi| (depth[bi], colors[bi], bi));
    roots.extend(rest);
    let mut out = Vec::with_capacity(f.bindings.len());
    let mut seen = vec![false; f.bindings.len()];
    // Iterative post-order: (binding, next operand to visit).
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for root in roots {
        if seen[root] {
            continue;
        }
        seen[root] = true;
        stack.push((root, 0));
        while let Some(top) = stack.last_mut() {
            let (bi, next) = *top;
            match producers[bi].get(next) {
                Some(&p) => {
                    top.1 += 1;
                    if !seen[p] {
                        seen[p] = true;
                        stack.push((p, 0));
                    }
                }
                None => {
                    out.push(bi);
                    stack.pop();
                }
            }
        }
    }
    out
}

impl Pass for Partition {
    fn info(&self) -> &'static PassInfo {
        &INFO
    }

    fn run(&self, module: &mut Module) -> Result<(), PassError> {
        let targets: Vec<String> = module
            .functions
            .values()
            .filter(|f| !f.is_primitive())
            .map(|f| f.name.clone())
            .collect();
        for name in targets {
            let Some(f) = module.functions.get(&name) else {
                continue;
            };
            let groups = fuse_groups(f, &visit_order(f, self.order), self.max_depth);
            let (rewritten, outlined) = outline(module, f, &groups)?;
            module.functions.insert(name, rewritten);
            for g in outlined {
                module.functions.insert(g.name.clone(), g);
            }
        }
        Ok(())
    }
}

/// A node of the dataflow graph: an op binding, or one result of a multi-result binding.
struct Node {
    pattern: OpPattern,
    /// (consumer node, edge pattern = the consumer's pattern)
    outputs: Vec<(usize, OpPattern)>,
    extern_ref: bool,
}

/// The dataflow graph of one function, nodes in topological order.
struct Graph {
    nodes: Vec<Node>,
    /// node of each binding (None for constants, which are not nodes)
    node_of_binding: Vec<Option<usize>>,
}

fn is_constant(b: &Binding) -> bool {
    b.callee.op().is_some_and(|op| op.name() == "constant")
}

/// The TVM pattern of one binding. AnnotateTIROpPattern judges the legalized PrimFunc by its
/// index expressions, so two outcomes depend on shapes and attributes, not on the op alone:
/// - a broadcasting op with an operand that already has the result's shape reads that
///   operand at the output's own indices, which makes the block ElemWise (`conv + bias`);
/// - `nn.pad` with nothing padded before any axis reads the input at the output's indices
///   (guarded by a bound check), which is ElemWise too; leading padding shifts them
///   (`A[i - 1]`), which is Injective.
pub fn binding_pattern(f: &Function, b: &Binding) -> OpPattern {
    let Some(op) = b.callee.op() else {
        return OpPattern::Opaque;
    };
    let pattern = op.pattern();
    if pattern == OpPattern::Broadcast {
        let result = b.results.first().map(|r| &f.ty(*r).shape);
        if b.operands.iter().any(|v| Some(&f.ty(*v).shape) == result) {
            return OpPattern::ElemWise;
        }
    }
    if op.name() == "nn.pad" {
        let widths = b
            .attrs
            .get("pad_width")
            .and_then(Attr::as_ints)
            .unwrap_or_default();
        if widths.iter().step_by(2).all(|&before| before == 0) {
            return OpPattern::ElemWise;
        }
    }
    pattern
}

/// The dataflow graph of `f` with nodes numbered in `order` (a topological order of the
/// bindings).
fn build_graph(f: &Function, order: &[usize]) -> Graph {
    let mut nodes: Vec<Node> = Vec::with_capacity(f.bindings.len());
    let mut node_of_binding = vec![None; f.bindings.len()];
    // The node that produces each value, if any.
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for &bi in order {
        let b = &f.bindings[bi];
        if is_constant(b) {
            continue;
        }
        let pattern = binding_pattern(f, b);
        let id = nodes.len();
        nodes.push(Node {
            pattern,
            outputs: Vec::new(),
            extern_ref: false,
        });
        node_of_binding[bi] = Some(id);
        for v in &b.operands {
            if let Some(&p) = producer.get(v) {
                nodes[p].outputs.push((id, pattern));
            }
        }
        if b.results.len() == 1 {
            producer.insert(b.results[0], id);
        } else {
            for r in &b.results {
                let item = nodes.len();
                nodes.push(Node {
                    pattern: OpPattern::Injective,
                    outputs: Vec::new(),
                    extern_ref: false,
                });
                nodes[id].outputs.push((item, OpPattern::Injective));
                producer.insert(*r, item);
            }
        }
    }
    for r in &f.results {
        if let Some(&p) = producer.get(r) {
            nodes[p].extern_ref = true;
        }
    }
    Graph {
        nodes,
        node_of_binding,
    }
}

/// A node of the post-dominator tree.
#[derive(Clone, Copy)]
struct DomNode {
    parent: Option<usize>,
    depth: usize,
    pattern: OpPattern,
}

fn combine(a: OpPattern, b: OpPattern) -> OpPattern {
    a.max(b)
}

fn post_dominators(g: &Graph) -> Vec<DomNode> {
    let n = g.nodes.len();
    let mut dom = vec![
        DomNode {
            parent: None,
            depth: 1,
            pattern: OpPattern::Opaque
        };
        n
    ];
    for id in (0..n).rev() {
        let node = &g.nodes[id];
        if node.extern_ref || node.outputs.is_empty() {
            continue;
        }
        let mut pattern = OpPattern::ElemWise;
        let mut outputs = node.outputs.iter();
        let &(first, first_pattern) = outputs.next().expect("non-empty outputs");
        let mut parent = Some(first);
        pattern = combine(pattern, first_pattern);
        for &(o, edge_pattern) in outputs {
            parent = parent.and_then(|p| lca(&dom, p, o, &mut pattern));
            pattern = combine(pattern, edge_pattern);
        }
        dom[id] = DomNode {
            parent,
            depth: parent.map_or(1, |p| dom[p].depth + 1),
            pattern,
        };
    }
    dom
}

/// Least common ancestor of two tree nodes, folding the patterns of the nodes climbed past.
fn lca(dom: &[DomNode], mut a: usize, mut b: usize, pattern: &mut OpPattern) -> Option<usize> {
    while a != b {
        let (da, db) = (dom[a].depth, dom[b].depth);
        if da < db {
            *pattern = combine(*pattern, dom[b].pattern);
            b = dom[b].parent?;
        } else if db < da {
            *pattern = combine(*pattern, dom[a].pattern);
            a = dom[a].parent?;
        } else {
            *pattern = combine(*pattern, dom[a].pattern);
            *pattern = combine(*pattern, dom[b].pattern);
            a = dom[a].parent?;
            b = dom[b].parent?;
        }
    }
    Some(a)
}

/// Union-find groups with TVM's bookkeeping (size, pattern, anchor).
struct Groups {
    parent: Vec<usize>,
    pattern: Vec<OpPattern>,
    num_nodes: Vec<usize>,
    has_anchor: Vec<bool>,
}

impl Groups {
    fn new(g: &Graph) -> Self {
        let n = g.nodes.len();
        Groups {
            parent: (0..n).collect(),
            pattern: g.nodes.iter().map(|x| x.pattern).collect(),
            num_nodes: vec![1; n],
            has_anchor: g
                .nodes
                .iter()
                .map(|x| x.pattern == OpPattern::OutEWiseFusable)
                .collect(),
        }
    }

    fn root(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            let up = self.parent[self.parent[x]];
            self.parent[x] = up;
            x = up;
        }
        x
    }

    fn merge(&mut self, child: usize, parent: usize) {
        let (c, p) = (self.root(child), self.root(parent));
        if c == p {
            return;
        }
        self.num_nodes[p] += self.num_nodes[c];
        self.parent[c] = p;
        if self.has_anchor[c] {
            self.has_anchor[p] = true;
            self.pattern[p] = combine(self.pattern[c], self.pattern[p]);
        }
    }
}

/// A visited set cleared in O(1): a node is visited when its stamp equals the epoch.
struct Marks {
    stamp: Vec<u32>,
    epoch: u32,
}

impl Marks {
    fn new(n: usize) -> Self {
        Marks {
            stamp: vec![0; n],
            epoch: 0,
        }
    }

    fn clear(&mut self) {
        if self.epoch == u32::MAX {
            self.stamp.iter_mut().for_each(|s| *s = 0);
            self.epoch = 0;
        }
        self.epoch += 1;
    }

    /// Marks `n`; returns whether it was unvisited.
    fn visit(&mut self, n: usize) -> bool {
        let fresh = self.stamp[n] != self.epoch;
        self.stamp[n] = self.epoch;
        fresh
    }
}

/// The fusion state. The graph walks are iterative (no recursion depth limit) and each
/// starts by clearing the visited set in O(1), so partitioning stays linear-ish in the
/// number of bindings (100,000-binding modules included).
struct Fuser<'a> {
    graph: &'a Graph,
    groups: Groups,
    marks: Marks,
    stack: Vec<usize>,
}

impl Fuser<'_> {
    /// Whether every node on every path from `src` (exclusive) to `sink` satisfies `cond`,
    /// judged by the pattern of the node's group; `cond`'s flag says the node is the sink.
    fn check_path(&mut self, src: usize, sink: usize, cond: fn(OpPattern, bool) -> bool) -> bool {
        self.marks.clear();
        self.stack.clear();
        self.stack
            .extend(self.graph.nodes[src].outputs.iter().map(|&(o, _)| o));
        while let Some(node) = self.stack.pop() {
            if !self.marks.visit(node) {
                continue;
            }
            let root = self.groups.root(node);
            if !cond(self.groups.pattern[root], node == sink) {
                return false;
            }
            if node != sink {
                self.stack
                    .extend(self.graph.nodes[node].outputs.iter().map(|&(o, _)| o));
            }
        }
        true
    }

    /// Merges every node on the paths from `src` to `sink` into the sink's group.
    fn commit(&mut self, src: usize, sink: usize) {
        self.marks.clear();
        self.stack.clear();
        self.stack.push(src);
        while let Some(node) = self.stack.pop() {
            if node == sink || !self.marks.visit(node) {
                continue;
            }
            self.groups.merge(node, sink);
            self.stack
                .extend(self.graph.nodes[node].outputs.iter().map(|&(o, _)| o));
        }
    }

    /// Size of the sink's group after fusing `child` and everything between them into it.
    fn fused_size(&mut self, child: usize, sink: usize) -> usize {
        let root = self.groups.root(sink);
        let mut sum = self.groups.num_nodes[root];
        self.marks.clear();
        self.stack.clear();
        self.stack.push(child);
        while let Some(node) = self.stack.pop() {
            if node == sink || !self.marks.visit(node) {
                continue;
            }
            // TVM counts the node's own group record here, root or not.
            sum += self.groups.num_nodes[node];
            self.stack
                .extend(self.graph.nodes[node].outputs.iter().map(|&(o, _)| o));
        }
        sum
    }
}

/// Runs the three fusion phases, visiting bindings in `order`, and returns, for every binding,
/// its group id (the root node) or `None` for constants.
fn fuse_groups(f: &Function, order: &[usize], max_depth: usize) -> Vec<Option<usize>> {
    use OpPattern::*;
    let graph = build_graph(f, order);
    let dom = post_dominators(&graph);
    let n = graph.nodes.len();
    let mut fuser = Fuser {
        graph: &graph,
        groups: Groups::new(&graph),
        marks: Marks::new(n),
        stack: Vec::new(),
    };
    for phase in 0..2 {
        for (id, dom_node) in dom.iter().enumerate() {
            // TVM reads the pattern of the node's own group record here, not its root's: a
            // node that absorbed an anchor carries the anchor's pattern from then on.
            let group_pattern = fuser.groups.pattern[id];
            let root = fuser.groups.root(id);
            let Some(sink) = dom_node.parent else {
                continue;
            };
            if group_pattern == Opaque {
                continue;
            }
            if fuser.fused_size(id, sink) > max_depth {
                continue;
            }
            if fuser.groups.root(sink) == root {
                continue;
            }
            let dom_pattern = dom_node.pattern;
            match group_pattern {
                OutEWiseFusable => {
                    if phase == 0
                        && dom_pattern == ElemWise
                        && fuser.check_path(id, sink, |k, _| k <= Broadcast)
                    {
                        fuser.commit(id, sink);
                    }
                }
                ElemWise | Broadcast => {
                    let cond: fn(OpPattern, bool) -> bool = |k, is_sink| {
                        if is_sink {
                            k <= Injective || k == CommReduce || k == OutEWiseFusable
                        } else {
                            k <= Injective
                        }
                    };
                    if (dom_pattern <= Injective || dom_pattern == CommReduce)
                        && fuser.check_path(id, sink, cond)
                    {
                        fuser.commit(id, sink);
                    }
                }
                Injective | Tuple => {
                    if phase == 1 && fuser.check_path(id, sink, |k, _| k <= Injective) {
                        fuser.commit(id, sink);
                    }
                }
                CommReduce | Opaque => {}
            }
        }
    }
    let mut out = vec![None; f.bindings.len()];
    for (bi, node) in graph.node_of_binding.iter().enumerate() {
        if let Some(node) = node {
            out[bi] = Some(fuser.groups.root(*node));
        }
    }
    out
}

/// The name of a fused function: `fused_` and the op names of its bindings, as TVM names them.
fn group_name(f: &Function, bindings: &[usize]) -> String {
    let mut name = String::from("fused");
    for &bi in bindings {
        let op = match &f.bindings[bi].callee {
            Callee::Op(op) => op.name(),
            Callee::Func(_) => "call",
        };
        if op == "constant" {
            continue;
        }
        let short = op.rsplit('.').next().unwrap_or(op);
        if name.len() + short.len() + 1 > 64 {
            break;
        }
        name.push('_');
        name.push_str(short);
    }
    name
}

/// Names for new functions: the base name, else `base_1`, `base_2`, ... skipping names the
/// module or this run already uses. The next suffix is remembered per base, so naming
/// thousands of groups with one base stays linear.
#[derive(Default)]
struct Namer {
    taken: std::collections::HashSet<String>,
    next_suffix: HashMap<String, usize>,
}

impl Namer {
    fn fresh(&mut self, module: &Module, base: &str) -> String {
        let free = |n: &str, taken: &std::collections::HashSet<String>| {
            !module.functions.contains_key(n) && !taken.contains(n)
        };
        let name = if free(base, &self.taken) {
            base.to_string()
        } else {
            let next = self.next_suffix.entry(base.to_string()).or_insert(1);
            loop {
                let candidate = format!("{base}_{next}");
                *next += 1;
                if free(&candidate, &self.taken) {
                    break candidate;
                }
            }
        };
        self.taken.insert(name.clone());
        name
    }
}

/// Outlines every group of `f` into a Primitive function; returns the rewritten `f` and the
/// new functions.
fn outline(
    module: &Module,
    f: &Function,
    group_of: &[Option<usize>],
) -> Result<(Function, Vec<Function>), PassError> {
    // Groups in order of their first binding; bindings of each group in program order.
    let mut group_index: HashMap<usize, usize> = HashMap::new();
    let mut members: Vec<Vec<usize>> = Vec::new();
    for (bi, g) in group_of.iter().enumerate() {
        if let Some(g) = g {
            let gi = *group_index.entry(*g).or_insert_with(|| {
                members.push(Vec::new());
                members.len() - 1
            });
            members[gi].push(bi);
        }
    }
    let binding_group: Vec<Option<usize>> = group_of
        .iter()
        .map(|g| g.map(|g| group_index[&g]))
        .collect();
    let mut def_binding: HashMap<ValueId, usize> = HashMap::new();
    for (bi, b) in f.bindings.iter().enumerate() {
        for r in &b.results {
            def_binding.insert(*r, bi);
        }
    }
    // Which values are used outside their defining group (by another group, a non-grouped
    // binding, or as a function result).
    let mut used_outside = vec![false; f.num_values()];
    for (bi, b) in f.bindings.iter().enumerate() {
        for v in &b.operands {
            if let Some(&d) = def_binding.get(v) {
                if binding_group[d].is_some() && binding_group[d] != binding_group[bi] {
                    used_outside[v.index()] = true;
                }
            }
        }
    }
    for r in &f.results {
        used_outside[r.index()] = true;
    }

    // The parameters `pack-weights` listed: a task parameter one of them feeds is layout-free.
    let packed = crate::pack_weights::packed_params(f);
    let is_packed = |v: &ValueId| f.params.contains(v) && packed.contains(f.name_of(*v));
    let mut namer = Namer::default();
    let mut outlined = Vec::with_capacity(members.len());
    let mut calls: Vec<Binding> = Vec::with_capacity(members.len());
    for bindings in &members {
        let name = namer.fresh(module, &group_name(f, bindings));
        let mut g = Function::new(name.clone());
        g.attrs.insert("Primitive".into(), Attr::Bool(true));
        let mut map: HashMap<ValueId, ValueId> = HashMap::new();
        let mut args: SmallVec<[ValueId; 4]> = SmallVec::new();
        let mut outputs: SmallVec<[ValueId; 1]> = SmallVec::new();
        let mut layout_free: Vec<Attr> = Vec::new();
        for &bi in bindings {
            let b = &f.bindings[bi];
            let mut operands: SmallVec<[ValueId; 4]> = SmallVec::new();
            for v in &b.operands {
                if let Some(&nv) = map.get(v) {
                    operands.push(nv);
                    continue;
                }
                let nv = match def_binding.get(v) {
                    // A constant is copied into the group instead of becoming a parameter.
                    Some(&d) if is_constant(&f.bindings[d]) => {
                        let c = &f.bindings[d];
                        let nv = g.new_value(Some(f.name_of(*v)), f.ty(*v).clone());
                        g.push(Binding {
                            results: SmallVec::from_slice(&[nv]),
                            callee: c.callee.clone(),
                            operands: SmallVec::new(),
                            attrs: c.attrs.clone(),
                        });
                        nv
                    }
                    _ => {
                        if is_packed(v) {
                            layout_free.push(Attr::Int(args.len() as i64));
                        }
                        args.push(*v);
                        g.add_param(Some(f.name_of(*v)), f.ty(*v).clone())
                    }
                };
                map.insert(*v, nv);
                operands.push(nv);
            }
            let mut results: SmallVec<[ValueId; 1]> = SmallVec::new();
            for r in &b.results {
                let nr = g.new_value(Some(f.name_of(*r)), f.ty(*r).clone());
                map.insert(*r, nr);
                results.push(nr);
                if used_outside[r.index()] {
                    outputs.push(*r);
                }
            }
            g.push(Binding {
                results,
                callee: b.callee.clone(),
                operands,
                attrs: b.attrs.clone(),
            });
        }
        if !layout_free.is_empty() {
            g.attrs.insert(
                tgc_ir::lowering::LAYOUT_FREE_ATTR.into(),
                Attr::List(layout_free),
            );
        }
        g.results = outputs.iter().map(|o| map[o]).collect();
        calls.push(Binding {
            results: outputs,
            callee: Callee::Func(name),
            operands: args,
            attrs: Default::default(),
        });
        outlined.push(g);
    }

    // Rebuild f: ungrouped bindings (constants still needed, calls of other functions) and
    // one call per group, in a topological order that keeps the original order where it can.
    let mut items: Vec<Binding> = Vec::new();
    let mut first_pos: Vec<usize> = Vec::new();
    let mut call_of_group = vec![usize::MAX; members.len()];
    for (bi, b) in f.bindings.iter().enumerate() {
        match binding_group[bi] {
            Some(gi) => {
                if call_of_group[gi] == usize::MAX {
                    call_of_group[gi] = items.len();
                    items.push(calls[gi].clone());
                    first_pos.push(bi);
                }
            }
            None => {
                items.push(b.clone());
                first_pos.push(bi);
            }
        }
    }
    let ordered = topological_order(f, &items, &first_pos)?;
    let mut rewritten = f.clone();
    rewritten.bindings = ordered;
    // Constants that only fed groups are now unused in f.
    crate::dce::eliminate_dead_bindings(&mut rewritten);
    Ok((rewritten, outlined))
}

/// Orders `items` so that every operand is defined before use, preferring original order.
fn topological_order(
    f: &Function,
    items: &[Binding],
    first_pos: &[usize],
) -> Result<Vec<Binding>, PassError> {
    let mut producer: HashMap<ValueId, usize> = HashMap::new();
    for (i, b) in items.iter().enumerate() {
        for r in &b.results {
            producer.insert(*r, i);
        }
    }
    let mut indegree = vec![0usize; items.len()];
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); items.len()];
    for (i, b) in items.iter().enumerate() {
        let mut deps: Vec<usize> = b
            .operands
            .iter()
            .filter_map(|v| producer.get(v).copied())
            .collect();
        deps.sort_unstable();
        deps.dedup();
        for d in deps {
            if d == i {
                return Err(PassError(format!(
                    "@{}: a fused group uses its own result",
                    f.name
                )));
            }
            indegree[i] += 1;
            users[d].push(i);
        }
    }
    let mut ready: BinaryHeap<Reverse<(usize, usize)>> = (0..items.len())
        .filter(|&i| indegree[i] == 0)
        .map(|i| Reverse((first_pos[i], i)))
        .collect();
    let mut out = Vec::with_capacity(items.len());
    while let Some(Reverse((_, i))) = ready.pop() {
        out.push(items[i].clone());
        for &u in &users[i] {
            indegree[u] -= 1;
            if indegree[u] == 0 {
                ready.push(Reverse((first_pos[u], u)));
            }
        }
    }
    if out.len() != items.len() {
        return Err(PassError(format!(
            "@{}: fused groups depend on each other cyclically",
            f.name
        )));
    }
    Ok(out)
}
