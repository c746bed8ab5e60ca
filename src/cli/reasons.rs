//! `gpufleet reasons`: what each status and reason code means and what to do ([`crate::advice`]).

use clap::Args;

use crate::advice;
use crate::model::Code;

pub(super) const REASONS_HELP: &str = "\
Examples:
  gpufleet reasons                       every code: what it means, what to do
  gpufleet reasons host-key-unknown      one code
  gpufleet reasons --markdown > docs/reasons.md   the page in the docs (generated from this)";

#[derive(Debug, Args)]
pub struct ReasonsArgs {
    /// Reason codes to explain (as a snapshot shows them) [default: every code]
    #[arg(value_name = "CODE", value_parser = parse_code)]
    pub codes: Vec<Code>,

    /// Print the whole guide as Markdown (docs/reasons.md is this output)
    #[arg(long, conflicts_with = "codes")]
    pub markdown: bool,
}

fn parse_code(s: &str) -> Result<Code, String> {
    s.parse::<Code>().map_err(|e| {
        let names: Vec<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
        match crate::diag::closest(s, names.iter().copied()) {
            Some(near) => format!("{e}; did you mean `{near}`?"),
            None => format!("{e}; `gpufleet reasons` lists them"),
        }
    })
}

/// Prints the guide (or the given codes); exit 0.
pub(super) fn run(args: &ReasonsArgs) -> anyhow::Result<u8> {
    let text = if args.markdown {
        advice::markdown()
    } else if args.codes.is_empty() {
        Code::ALL.iter().map(|c| advice::text(*c)).collect()
    } else {
        args.codes.iter().map(|c| advice::text(*c)).collect()
    };
    use std::io::Write;
    std::io::stdout().write_all(text.as_bytes())?;
    Ok(0)
}
