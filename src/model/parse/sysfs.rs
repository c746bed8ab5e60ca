//! `/proc/driver/nvidia/gpus/<bus>/information` and NVIDIA PCI devices under `/sys/bus/pci/devices`.
//!
//! The information file is `Key: \t value` lines written by open-gpu-kernel-modules
//! `kernel-open/nvidia/nv-procfs.c` (Model, GPU UUID, Bus Location, ...). PCI attribute files
//! hold one hex number: `vendor` (`0x10de`), `device` (`0x2335`), `class` (24 bits, `0x030200`).

/// What the driver's information file says about one GPU.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcGpu {
    /// The folder name under /proc/driver/nvidia/gpus, lower-case `dddd:bb:dd.f`.
    pub bus_id: String,
    pub model: Option<String>,
    pub uuid: Option<String>,
    /// The `Model:` line, for evidence.
    pub model_line: Option<String>,
}

/// Parses an information file for the GPU at `bus_id`.
pub fn parse_information(bus_id: &str, text: &str) -> ProcGpu {
    let mut g = ProcGpu {
        bus_id: normalize_bus_id(bus_id).unwrap_or_else(|| bus_id.to_string()),
        ..ProcGpu::default()
    };
    for line in text.lines() {
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        if v.is_empty() {
            continue;
        }
        match k.trim() {
            "Model" => {
                g.model = Some(v.to_string());
                g.model_line = Some(line.to_string());
            }
            "GPU UUID" => g.uuid = Some(v.to_string()),
            _ => {}
        }
    }
    g
}

/// Lower-case `dddd:bb:dd.f` from nvidia-smi's `00000000:18:00.0` or sysfs' `0000:18:00.0`.
pub fn normalize_bus_id(s: &str) -> Option<String> {
    let s = s.trim();
    let (rest, func) = s.rsplit_once('.')?;
    let mut parts = rest.split(':');
    let (domain, bus, dev) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let domain = u32::from_str_radix(domain, 16).ok()?;
    let bus = u8::from_str_radix(bus, 16).ok()?;
    let dev = u8::from_str_radix(dev, 16).ok()?;
    let func = u8::from_str_radix(func, 16).ok()?;
    (domain <= 0xffff && dev < 32 && func < 8)
        .then(|| format!("{domain:04x}:{bus:02x}:{dev:02x}.{func:x}"))
}

/// One NVIDIA PCI function read from sysfs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PciDevice {
    /// Lower-case `dddd:bb:dd.f`.
    pub bus_id: String,
    pub device_id: u16,
    /// The 24-bit class code (`0x030200` = 3D controller, `0x030000` = VGA).
    pub class: u32,
    /// The kernel driver bound to it (`nvidia`, `vfio-pci`, `nouveau`), from the
    /// `/sys/bus/pci/devices/<bus>/driver` link; `None` when unbound or unread.
    pub driver: Option<String>,
    /// Whether that link (or its absence: unbound) was read; `false` leaves `driver` unknown.
    pub driver_read: bool,
}

impl PciDevice {
    /// Bound to a driver that is not NVIDIA's: passed through to a VM (`vfio-pci`, `pci-stub`) or
    /// driven by `nouveau` or nova (its PCI driver is named `NovaCore`, module `nova_core`)
    /// (docs/domain.md, "GPUs the driver did not take", "Schema 3").
    pub fn bound_elsewhere(&self) -> bool {
        matches!(
            self.driver.as_deref(),
            Some("vfio-pci" | "pci-stub" | "nouveau" | "NovaCore" | "nova_core" | "nova-core")
        )
    }

    /// Display (0x0300xx) or 3D (0x0302xx) controllers: the GPUs. Audio and USB functions of the
    /// same card are not.
    pub fn is_gpu(&self) -> bool {
        matches!(self.class >> 8, 0x0300 | 0x0302)
    }
}

/// Parses one hex attribute (`0x10de\n`).
pub fn parse_hex(text: &str) -> Option<u32> {
    let t = text.trim();
    let hex = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X"))?;
    u32::from_str_radix(hex, 16).ok()
}

/// The probe's PCI summary (`meta /sys/bus/pci/devices`, src/probe/probe.sh): the functions
/// it sent in full (NVIDIA, physical network/RDMA), what it only counted, and what it could not
/// read or name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PciSummary<'a> {
    /// `full BUS`: their vendor, device, class and driver follow as their own sections.
    pub full: Vec<&'a str>,
    /// `unreadable BUS`: a function whose vendor could not be read (it could be a GPU).
    pub unreadable: Vec<&'a str>,
    /// `not-regular BUS`: a function whose vendor is a FIFO, socket or device, never opened (it
    /// could be a GPU).
    pub not_regular: Vec<&'a str>,
    /// `vfs BUS N`: a parent and its SR-IOV virtual functions.
    pub vfs: Vec<(&'a str, u64)>,
    /// `functions N`, `vf N`, `other N`: every function, the virtual ones, the others counted.
    pub functions: Option<u64>,
    pub vf: u64,
    pub other: u64,
    /// `cut-full N`: NVIDIA or network functions past the 256 sent in full.
    pub cut_full: u64,
    /// `cut-unreadable N`: unreadable functions past the 256 named.
    pub cut_unreadable: u64,
    /// `cut-vfs N`: parents past the 256 named (their VFs are in `vf`).
    pub cut_vfs: u64,
}

/// Parses the PCI summary's lines (see [`PciSummary`]); unknown lines are skipped.
pub fn parse_pci_summary(text: &str) -> PciSummary<'_> {
    let mut s = PciSummary::default();
    for line in text.lines() {
        let mut w = line.split_ascii_whitespace();
        let (Some(k), Some(v)) = (w.next(), w.next()) else {
            continue;
        };
        let n = v.parse::<u64>().unwrap_or(0);
        match k {
            "full" => s.full.push(v),
            "unreadable" => s.unreadable.push(v),
            "not-regular" => s.not_regular.push(v),
            "vfs" => s
                .vfs
                .push((v, w.next().and_then(|c| c.parse().ok()).unwrap_or(0))),
            "functions" => s.functions = v.parse().ok(),
            "vf" => s.vf = n,
            "other" => s.other = n,
            "cut-full" => s.cut_full = n,
            "cut-unreadable" => s.cut_unreadable = n,
            "cut-vfs" => s.cut_vfs = n,
            _ => {}
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h200_information_file() {
        let text = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 41\nGPU UUID: \t GPU-5f0c2a1e-7d3b-4c8e-9a61-2b4d6e8f0a13\nBus Location: \t 0000:00:06.0\nGPU Firmware: \t N/A\n";
        let g = parse_information("0000:00:06.0", text);
        assert_eq!(g.model.as_deref(), Some("NVIDIA H200"));
        assert_eq!(
            g.uuid.as_deref(),
            Some("GPU-5f0c2a1e-7d3b-4c8e-9a61-2b4d6e8f0a13")
        );
        assert_eq!(g.bus_id, "0000:00:06.0");
    }

    #[test]
    fn bus_ids() {
        assert_eq!(
            normalize_bus_id("00000000:1A:00.0").as_deref(),
            Some("0000:1a:00.0")
        );
        assert_eq!(
            normalize_bus_id("0000:18:00.0").as_deref(),
            Some("0000:18:00.0")
        );
        assert_eq!(normalize_bus_id("0000:18:00"), None);
        assert_eq!(normalize_bus_id("0000:18:40.0"), None);
        assert_eq!(normalize_bus_id("x:y:z.w"), None);
    }

    #[test]
    fn class_and_hex() {
        assert_eq!(parse_hex("0x030200\n"), Some(0x030200));
        assert_eq!(parse_hex("10de"), None);
        let d = |class| PciDevice {
            bus_id: String::new(),
            device_id: 0,
            class,
            driver: None,
            driver_read: true,
        };
        assert!(d(0x030200).is_gpu());
        assert!(d(0x030000).is_gpu());
        assert!(!d(0x040300).is_gpu());
        assert!(!d(0x030100).is_gpu());
    }

    #[test]
    fn pci_summary_lines() {
        let s = parse_pci_summary(
            "full 0000:18:00.0\nfull 0000:3b:00.0\nvfs 0000:3b:00.0 64\nunreadable 0000:00:1f.3\n\
             not-regular 0000:00:1f.4\n\
             functions 10000\nvf 9800\nother 197\ncut-full 3\nnonsense\n",
        );
        assert_eq!(s.full, ["0000:18:00.0", "0000:3b:00.0"]);
        assert_eq!(s.vfs, [("0000:3b:00.0", 64)]);
        assert_eq!(s.unreadable, ["0000:00:1f.3"]);
        assert_eq!(s.not_regular, ["0000:00:1f.4"]);
        assert_eq!(
            (s.functions, s.vf, s.other, s.cut_full),
            (Some(10000), 9800, 197, 3)
        );
        assert_eq!((s.cut_unreadable, s.cut_vfs), (0, 0));
    }
}
