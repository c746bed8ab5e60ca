//! `gpufleet nccl LOG…` (the reading and the verdicts are `crate::nccl`).

use std::collections::HashMap;
use std::path::PathBuf;

use clap::{Args, ValueEnum};

use crate::model::text::{json_string, terminal_safe};
use crate::nccl::{Logs, Mechanism, Peermem, Report};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NcclFormat {
    /// One line per host, one per HCA under it
    Table,
    /// {"hosts": [{host, gdr, why, nccl_version, peermem_loaded, hcas: [...], evidence}], "summary"}
    Json,
}

#[derive(Debug, Args)]
pub struct NcclArgs {
    /// NCCL_DEBUG=INFO output: one file per rank, or a whole job's log (hosts mixed); 2 GiB
    /// at most each
    #[arg(value_name = "LOG", required = true)]
    pub logs: Vec<PathBuf>,
    /// The hosts' probe reports (`gpufleet snapshot --format json` or `jsonl`, as `snapshot
    /// --from` reads them): whether nvidia_peermem was loaded on each host; repeatable
    #[arg(long, value_name = "FILE")]
    pub snapshot: Vec<PathBuf>,
    /// Output format
    #[arg(long, short = 'f', value_enum, default_value = "table")]
    pub format: NcclFormat,
    /// Table: print the evidence lines under each HCA (JSON always has them)
    #[arg(long, short = 'e')]
    pub evidence: bool,
}

pub const NCCL_HELP: &str = "\
Says per host and per HCA whether GPUDirect RDMA ran, and how:
  dma-buf                the IB plugin's \"(DMABUF) enabled\" line with GDRDMA channels, or
                         GDRDMA channels on a host whose probe report (--snapshot) shows
                         nvidia_peermem not loaded
  nvidia-peermem         the plugin's \"(nvidia-peermem) enabled\", or GDRDMA channels with
                         NCCL_DMABUF_ENABLE=0 on a host whose report shows nvidia_peermem loaded
  no-gdr                 channels over the network without GDRDMA, \"GPU Direct RDMA Disabled\",
                         or NET/Socket (TCP)
  gdr-mechanism-unknown  anything else, with why (core NCCL never logs which mechanism it chose)
\"DMA-BUF is available on GPU device N\" is printed at every init and proves nothing. A host is
the worst of the HCAs that carried channels. Hosts are matched to the snapshot's nodes by name,
else by the name's first label when that is unique.

Exit codes: 0 every host dma-buf; 1 some host nvidia-peermem or no-gdr (wins over unknown);
2 an unreadable input (a log or snapshot that cannot be read, or a log with no NCCL line) or
usage error; 3 some host gdr-mechanism-unknown.

Examples:
  NCCL_DEBUG=INFO srun -N2 all_reduce_perf -b 1G -e 1G > job.log 2>&1
  gpufleet nccl job.log
  gpufleet nccl rank-*.log --snapshot fleet.json --format json";

/// The snapshot's nodes, by name: `peermem.loaded` and where it was read.
struct Probe {
    by_name: HashMap<String, (Option<bool>, String)>,
    /// Short name (first label) → full names.
    by_short: HashMap<String, Vec<String>>,
}

fn short(name: &str) -> &str {
    name.split('.').next().unwrap_or(name)
}

impl Probe {
    fn load(files: &[PathBuf]) -> anyhow::Result<Option<Probe>> {
        if files.is_empty() {
            return Ok(None);
        }
        let loaded = crate::snapshot::collected::load(files)
            .map_err(|e| anyhow::anyhow!("{}", terminal_safe(&e)))?;
        crate::snapshot::collected::say_findings(&loaded.warnings());
        let mut p = Probe {
            by_name: HashMap::new(),
            by_short: HashMap::new(),
        };
        for c in loaded.into_collected() {
            let r = &c.report;
            let loaded = r.peermem.as_ref().and_then(|p| p.loaded);
            let source = format!(
                "{}:{} (scanned_at {})",
                c.file.display(),
                c.line,
                r.scanned_at
            );
            p.by_short
                .entry(short(&r.name).to_string())
                .or_default()
                .push(r.name.clone());
            p.by_name.insert(r.name.clone(), (loaded, source));
        }
        Ok(Some(p))
    }

    fn peermem(&self, host: &str) -> Peermem {
        let hit = self.by_name.get(host).or_else(|| {
            match self.by_short.get(short(host)).map(Vec::as_slice) {
                Some([one]) => self.by_name.get(one),
                _ => None,
            }
        });
        match hit {
            Some((loaded, source)) => Peermem::Report {
                loaded: *loaded,
                source: source.clone(),
            },
            None => Peermem::NotInSnapshot,
        }
    }
}

pub(super) fn run(args: &NcclArgs) -> anyhow::Result<u8> {
    let mut logs = Logs::default();
    for path in &args.logs {
        logs.read_file(path).map_err(|e| {
            anyhow::anyhow!(
                "{}: {}",
                terminal_safe(&path.display().to_string()),
                terminal_safe(&e)
            )
        })?;
    }
    let probe = Probe::load(&args.snapshot)?;
    let report = logs.report(&|h| match &probe {
        Some(p) => p.peermem(h),
        None => Peermem::NoSnapshot,
    });
    if logs.unattributed > 0 {
        eprintln!(
            "gpufleet: nccl: {} line(s) without a HOST:PID:TID prefix in files that name several hosts were not counted",
            logs.unattributed
        );
    }
    match args.format {
        NcclFormat::Json => crate::outln!("{}", json_string(&report, true)?),
        NcclFormat::Table => super::out::text(&table(&report, args.evidence)),
    }
    Ok(report.exit_code())
}

/// The table: `HOST GDR NCCL WHY`, then each HCA indented; every node string escaped.
fn table(r: &Report, evidence: bool) -> String {
    let safe = |s: &str| terminal_safe(s).into_owned();
    let rows: Vec<[String; 4]> = r
        .hosts
        .iter()
        .map(|h| {
            let version = if h.nccl_version.is_empty() {
                "?".to_string()
            } else {
                h.nccl_version.join(",")
            };
            [
                safe(&h.host),
                h.gdr.word().into(),
                safe(&version),
                safe(&h.why),
            ]
        })
        .collect();
    let width = |i: usize, title: &str| {
        rows.iter()
            .map(|r| r[i].chars().count())
            .chain([title.len()])
            .max()
            .unwrap_or(0)
    };
    let (w0, w1, w2) = (width(0, "HOST"), width(1, "GDR"), width(2, "NCCL"));
    let mut out = format!("{:<w0$}  {:<w1$}  {:<w2$}  WHY\n", "HOST", "GDR", "NCCL");
    for (h, row) in r.hosts.iter().zip(&rows) {
        out.push_str(&format!(
            "{:<w0$}  {:<w1$}  {:<w2$}  {}\n",
            row[0], row[1], row[2], row[3]
        ));
        for hca in &h.hcas {
            let name = hca
                .name
                .as_deref()
                .map_or_else(|| format!("NET/{}/{}", hca.transport, hca.index), &safe);
            out.push_str(&format!(
                "  {name}  {}  {} GDRDMA / {} other channel(s): {}\n",
                hca.gdr.word(),
                hca.gdrdma_channels,
                hca.other_channels,
                safe(&hca.why)
            ));
            if evidence {
                for e in &hca.evidence {
                    out.push_str(&format!(
                        "      {}:{}: {}\n",
                        safe(&e.file),
                        e.line,
                        safe(&e.text)
                    ));
                }
            }
        }
        if evidence {
            for e in &h.evidence {
                out.push_str(&format!(
                    "    {}:{}: {}\n",
                    safe(&e.file),
                    e.line,
                    safe(&e.text)
                ));
            }
            out.push_str(&format!(
                "    nvidia_peermem: {}\n",
                safe(&h.peermem_source)
            ));
        }
    }
    let s = &r.summary;
    let mut parts = Vec::new();
    for (n, m) in [
        (s.dma_buf, Mechanism::DmaBuf),
        (s.nvidia_peermem, Mechanism::Peermem),
        (s.no_gdr, Mechanism::NoGdr),
        (s.unknown, Mechanism::Unknown),
    ] {
        if n > 0 {
            parts.push(format!("{n} {}", m.word()));
        }
    }
    out.push_str(&format!(
        "{} host(s): {}\n",
        r.hosts.len(),
        parts.join(", ")
    ));
    out
}
