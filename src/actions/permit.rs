//! The write permit: the only key to code that changes nodes. docs/architecture.md decision 7:
//! any source that says read-only (flag, config, inventory) makes write actions impossible to
//! reach — here, impossible to call, because every function that runs a write-side command
//! (drain, recipe step, node lock and unlock, uncordon; on a node or here) takes a
//! `&WritePermit`, and the only way to get one is [`WritePermit::new`], which must be given
//! every read-only source (a struct with no defaults, so none can be left out) and refuses
//! while any of them says read-only. The read-only probe needs none.

/// Every source that may say read-only, each of which must be given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadOnlySources {
    /// `--read-only`.
    pub flag: bool,
    /// `config [tui] read_only`.
    pub config: bool,
    /// `inventory read_only`.
    pub inventory: bool,
}

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
    /// A permit, unless some source says read-only.
    pub fn new(sources: ReadOnlySources) -> Result<WritePermit, ReadOnly> {
        let ReadOnlySources {
            flag,
            config,
            inventory,
        } = sources;
        let saying: Vec<String> = [
            ("--read-only", flag),
            ("config [tui] read_only", config),
            ("inventory read_only", inventory),
        ]
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
        let none = ReadOnlySources {
            flag: false,
            config: false,
            inventory: false,
        };
        assert!(WritePermit::new(none).is_ok());
        let e = WritePermit::new(ReadOnlySources {
            inventory: true,
            ..none
        })
        .unwrap_err();
        assert_eq!(e.0, ["inventory read_only"]);
        assert!(e.to_string().contains("not allowed"));
        let e = WritePermit::new(ReadOnlySources {
            flag: true,
            config: true,
            inventory: false,
        })
        .unwrap_err();
        assert_eq!(e.0, ["--read-only", "config [tui] read_only"]);
    }
}
