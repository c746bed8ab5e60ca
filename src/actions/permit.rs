//! The write permit: the only key to code that changes nodes. docs/architecture.md decision 7:
//! any source that says read-only (flag, config, inventory) makes write actions impossible to
//! reach — here, impossible to call, because every function that changes a node takes a
//! `&WritePermit`, and the only way to get one is [`WritePermit::new`], which refuses while any
//! source says read-only.

/// Proof that writes are allowed. It has a private field: no other code can build one.
#[derive(Debug)]
pub struct WritePermit {
    _private: (),
}

/// Writes were refused: these sources say read-only.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("read-only ({}): this command changes nodes and is not allowed", .0.join(", "))]
pub struct ReadOnly(pub Vec<String>);

impl WritePermit {
    /// A permit, unless some source says read-only. `sources` pairs a description (`--read-only`,
    /// `config [tui] read_only`, `inventory read_only`) with what it says.
    pub fn new(sources: &[(&str, bool)]) -> Result<WritePermit, ReadOnly> {
        let saying: Vec<String> = sources
            .iter()
            .filter(|(_, ro)| *ro)
            .map(|(s, _)| s.to_string())
            .collect();
        if saying.is_empty() {
            Ok(WritePermit { _private: () })
        } else {
            Err(ReadOnly(saying))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_read_only_source_refuses_the_permit() {
        assert!(WritePermit::new(&[("--read-only", false), ("inventory", false)]).is_ok());
        let e =
            WritePermit::new(&[("--read-only", false), ("inventory read_only", true)]).unwrap_err();
        assert_eq!(e.0, ["inventory read_only"]);
        assert!(e.to_string().contains("not allowed"));
    }
}
