//! The crate's top-level modules form no import cycle (docs/architecture.md, "Layers"): every
//! `crate::X` path in a module's code (comment lines left out) is an edge from that module to `X`,
//! and the graph of those edges has no cycle. A cycle is printed with one file and line per
//! edge, so the import to move is named.

// A test: a panic here is a failing run (Cargo.toml [lints] denies it in the product).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The code of a Rust file without its comment lines (`//`, `///`, `//!`: where doc links name
/// other modules); a `crate::` anywhere else counts, which errs on the side of an edge.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| {
            if l.trim_start().starts_with("//") {
                ""
            } else {
                l
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

#[test]
fn top_level_modules_have_no_import_cycle() {
    let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let top = |p: &Path| -> String {
        let rel = p.strip_prefix(&src).unwrap();
        let first = rel
            .components()
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy();
        first.trim_end_matches(".rs").to_string()
    };
    let modules: BTreeSet<String> = files
        .iter()
        .map(|p| top(p))
        .filter(|m| m != "main" && m != "lib")
        .collect();
    // module → imported module → the first place (file:line) that imports it.
    let mut edges: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for f in &files {
        let from = top(f);
        if !modules.contains(&from) {
            continue;
        }
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        for (n, line) in code.lines().enumerate() {
            let mut rest = line;
            while let Some(i) = rest.find("crate::") {
                rest = &rest[i + "crate::".len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if name != from && modules.contains(&name) {
                    let at = format!("{}:{}", f.strip_prefix(&src).unwrap().display(), n + 1);
                    edges
                        .entry(from.clone())
                        .or_default()
                        .entry(name)
                        .or_insert(at);
                }
            }
        }
    }
    // Depth-first search for a back edge; the cycle is the stack from its target.
    fn visit(
        m: &str,
        edges: &BTreeMap<String, BTreeMap<String, String>>,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[i..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for next in edges.get(m).into_iter().flat_map(|e| e.keys()) {
            if let Some(c) = visit(next, edges, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in &modules {
        if let Some(cycle) = visit(m, &edges, &mut Vec::new(), &mut done) {
            let shown: Vec<String> = cycle
                .windows(2)
                .map(|w| format!("  {} -> {} ({})", w[0], w[1], edges[&w[0]][&w[1]]))
                .collect();
            panic!(
                "import cycle between top-level modules:\n{}",
                shown.join("\n")
            );
        }
    }
    // The leaves import nothing of the crate.
    for leaf in ["model", "diag", "yaml"] {
        assert!(
            edges.get(leaf).is_none_or(|e| e.is_empty()),
            "{leaf} is a leaf but imports {:?}",
            edges[leaf]
        );
    }
}
