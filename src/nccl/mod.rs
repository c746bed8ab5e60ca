//! `gpufleet nccl LOG…`: proof from a job's NCCL_DEBUG=INFO output that GPUDirect RDMA ran
//! over DMA-BUF (docs/domain.md, "NCCL logs: `gpufleet nccl`").
//!
//! - [`parse`]: one line → its host and what it says (pure).
//! - [`verdict`]: a host's lines → per HCA and per host, DMA-BUF / nvidia-peermem / no GDR /
//!   `gdr-mechanism-unknown`, with why and the evidence lines.
//!
//! Logs are hostile input: each file is streamed (never held whole), a line is kept to its
//! first [`MAX_LINE`] bytes, a file may have at most [`MAX_FILE`] bytes and the logs
//! [`MAX_HOSTS`] hosts in all; bytes that are not UTF-8 are read lossily. Nothing read is
//! printed raw: the CLI escapes it.

pub mod parse;
pub mod verdict;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Serialize;

pub use verdict::{Evidence, HcaVerdict, HostVerdict, Mechanism, Peermem};

/// A line is read up to this many bytes; the rest of it is dropped (NCCL's lines are under
/// 1 KiB: `NVIDIA/nccl: src/debug.cc` formats into a 1024-byte buffer).
pub const MAX_LINE: usize = 64 * 1024;
/// The most bytes one log file may have (2 GiB): a 1000-rank job's INFO log is well under.
pub const MAX_FILE: u64 = 2 * 1024 * 1024 * 1024;
/// The most hosts all the logs together may name.
pub const MAX_HOSTS: usize = 100_000;

/// Bare lines (no host prefix) kept per file until the file's hosts are known.
const MAX_BARE: usize = 4096;

/// The logs read so far, by host.
#[derive(Debug, Default)]
pub struct Logs {
    hosts: BTreeMap<String, verdict::Host>,
    /// NCCL lines read in all.
    pub nccl_lines: u64,
    /// Bare lines of files that name several hosts: whose they are cannot be told.
    pub unattributed: u64,
}

/// The whole answer: one verdict per host, and the counts.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub hosts: Vec<HostVerdict>,
    pub summary: Summary,
}

/// How many hosts got each answer.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Summary {
    #[serde(rename = "dma-buf")]
    pub dma_buf: usize,
    #[serde(rename = "nvidia-peermem")]
    pub nvidia_peermem: usize,
    #[serde(rename = "no-gdr")]
    pub no_gdr: usize,
    #[serde(rename = "gdr-mechanism-unknown")]
    pub unknown: usize,
}

impl Report {
    /// 0 every host DMA-BUF; 1 some host nvidia-peermem or no GDR (wins over unknown); 3 some
    /// host unknown. (2, unreadable input, is the caller's.)
    pub fn exit_code(&self) -> u8 {
        let s = &self.summary;
        if s.nvidia_peermem + s.no_gdr > 0 {
            1
        } else if s.unknown > 0 || self.hosts.is_empty() {
            3
        } else {
            0
        }
    }
}

impl Logs {
    /// Reads one log file (streamed). Errors, as a sentence: unreadable, over [`MAX_FILE`],
    /// no NCCL line at all (not an NCCL_DEBUG=INFO log), more than [`MAX_HOSTS`] hosts.
    pub fn read_file(&mut self, path: &Path) -> Result<(), String> {
        let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
        // A regular file over the cap is refused from its size, unread (a FIFO or a device
        // is read to the cap).
        if f.metadata()
            .is_ok_and(|m| m.is_file() && m.len() > MAX_FILE)
        {
            return Err(too_large());
        }
        self.read(&path.display().to_string(), f)
    }

    /// Reads one log from `r`, named `file` in evidence and errors (as [`Logs::read_file`]).
    pub fn read(&mut self, file: &str, r: impl Read) -> Result<(), String> {
        let mut r = BufReader::with_capacity(64 * 1024, r.take(MAX_FILE + 1));
        let mut line: Vec<u8> = Vec::with_capacity(1024);
        let mut no = 0u64;
        let mut total = 0u64;
        let mut state = FileState::default();
        loop {
            let buf = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            };
            if buf.is_empty() {
                if !line.is_empty() {
                    no += 1;
                    self.line(file, no, &line, &mut state)?;
                }
                break;
            }
            let (used, end) = match buf.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (buf.len(), false),
            };
            let take = &buf[..if end { used - 1 } else { used }];
            let room = MAX_LINE.saturating_sub(line.len());
            line.extend_from_slice(&take[..take.len().min(room)]);
            r.consume(used);
            total += used as u64;
            if total > MAX_FILE {
                return Err(too_large());
            }
            if end {
                no += 1;
                self.line(file, no, &line, &mut state)?;
                line.clear();
            }
        }
        if state.nccl == 0 {
            return Err(
                "no NCCL line (not NCCL_DEBUG=INFO output: no `NCCL INFO` or `NCCL version` line)"
                    .into(),
            );
        }
        // Bare lines belong to the file's one host, or to a host named after the file.
        let owner = match state.hosts.len() {
            0 => Some(file.to_string()),
            1 => state.hosts.keys().next().cloned(),
            _ => None,
        };
        match owner {
            Some(owner) => {
                let fresh = !self.hosts.contains_key(&owner);
                let host = self.host(&owner)?;
                if fresh && state.hosts.is_empty() {
                    host.from_file = true;
                }
                for (text, line) in &state.bare {
                    if let Some(l) = parse::line(text) {
                        let at = verdict::At {
                            file,
                            line: *line,
                            text,
                        };
                        host.add(&l.event, &at);
                    }
                }
            }
            None => self.unattributed += state.bare.len() as u64,
        }
        Ok(())
    }

    fn host(&mut self, name: &str) -> Result<&mut verdict::Host, String> {
        if self.hosts.len() >= MAX_HOSTS && !self.hosts.contains_key(name) {
            return Err(format!("more than {MAX_HOSTS} hosts"));
        }
        Ok(self.hosts.entry(name.to_string()).or_default())
    }

    fn line(
        &mut self,
        file: &str,
        no: u64,
        bytes: &[u8],
        st: &mut FileState,
    ) -> Result<(), String> {
        let text = String::from_utf8_lossy(bytes);
        let text = text.trim_end_matches('\r');
        let Some(l) = parse::line(text) else {
            return Ok(());
        };
        st.nccl += 1;
        self.nccl_lines += 1;
        let ev = verdict::At {
            file,
            line: no,
            text,
        };
        match l.host {
            Some(h) => {
                st.hosts.entry(h.to_string()).or_insert(());
                if verdict::interesting(&l) {
                    self.host(h)?.add(&l.event, &ev);
                } else if !self.hosts.contains_key(h) {
                    self.host(h)?;
                }
            }
            None if verdict::interesting(&l) => {
                if st.bare.len() < MAX_BARE {
                    st.bare.push((text.to_string(), no));
                } else {
                    self.unattributed += 1;
                }
            }
            None => {}
        }
        Ok(())
    }

    /// The answer per host, `peermem` saying what the hosts' probe reports say of each.
    pub fn report(&self, peermem: &dyn Fn(&str) -> Peermem) -> Report {
        let hosts: Vec<HostVerdict> = self
            .hosts
            .iter()
            .map(|(name, h)| verdict::host_verdict(name, h, &peermem(name)))
            .collect();
        let mut summary = Summary::default();
        for h in &hosts {
            *match h.gdr {
                Mechanism::DmaBuf => &mut summary.dma_buf,
                Mechanism::Peermem => &mut summary.nvidia_peermem,
                Mechanism::NoGdr => &mut summary.no_gdr,
                Mechanism::Unknown => &mut summary.unknown,
            } += 1;
        }
        Report { hosts, summary }
    }
}

/// `larger than 2048 MiB (the limit for an NCCL log)`.
fn too_large() -> String {
    format!(
        "larger than {} MiB (the limit for an NCCL log)",
        MAX_FILE >> 20
    )
}

#[derive(Default)]
struct FileState {
    nccl: u64,
    hosts: BTreeMap<String, ()>,
    /// Bare lines (no host prefix) and their line numbers.
    bare: Vec<(String, u64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_long_lines_and_bounds_them() {
        let mut logs = Logs::default();
        let mut text = vec![b'x'; 3 * MAX_LINE];
        text.extend_from_slice(b"\nh:1:2 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n");
        logs.read("f", &text[..]).unwrap();
        let r = logs.report(&|_| Peermem::NoSnapshot);
        assert_eq!(r.hosts.len(), 1);
        assert_eq!(r.hosts[0].nccl_version, vec!["2.21.5+cuda12.4"]);
        assert_eq!(r.exit_code(), 3);
        let e = Logs::default()
            .read("g", &b"\x00\x01garbage\n"[..])
            .unwrap_err();
        assert!(e.starts_with("no NCCL line"), "{e}");
    }

    #[test]
    fn a_file_without_host_prefixes_is_a_host_named_after_it() {
        let mut logs = Logs::default();
        let text = "NCCL version 2.21.5+cuda12.4\n[0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n";
        logs.read("rank0.log", text.as_bytes()).unwrap();
        let r = logs.report(&|_| Peermem::NoSnapshot);
        assert_eq!(r.hosts.len(), 1);
        assert_eq!(r.hosts[0].host, "rank0.log");
        assert!(r.hosts[0].from_file);
        assert_eq!(r.hosts[0].gdr, Mechanism::NoGdr);
    }

    #[test]
    fn a_regular_file_over_the_cap_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.log");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE + 1)
            .unwrap();
        let e = Logs::default().read_file(&big).unwrap_err();
        assert_eq!(e, "larger than 2048 MiB (the limit for an NCCL log)");
    }

    #[test]
    fn bare_lines_go_to_the_files_one_host() {
        let mut logs = Logs::default();
        let text = "NCCL version 2.4.7+cuda10.0\nnode-a:1:2 [0] NCCL INFO NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'\n";
        logs.read("f", text.as_bytes()).unwrap();
        let r = logs.report(&|_| Peermem::NoSnapshot);
        assert_eq!(r.hosts[0].host, "node-a");
        assert_eq!(r.hosts[0].nccl_version, vec!["2.4.7+cuda10.0"]);
        assert_eq!(r.hosts[0].gdr, Mechanism::NoGdr);
        assert_eq!(r.exit_code(), 1);
    }
}
