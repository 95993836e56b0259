//! The msr driver that SMI counting reads through (`rtgauge_host::smi`): loaded for a run where it is
//! missing and the CPU has the counter, unloaded when the run ends — also after a killed run: the loader
//! writes its pid to [`MARKER`], and the next run that finds that pid dead adopts the module and unloads it
//! at its own end (as the tracefs mount is adopted, `crate::trace`).

use std::path::Path;

/// Where a run that loaded the msr module writes its pid.
const MARKER: &str = "/run/rtgauge/msr-loaded-by";

/// The msr driver held for a run: unloaded on drop when this run loaded it (or adopted it from a killed
/// run that did).
#[derive(Debug)]
pub struct MsrDriver {
    owned: bool,
    /// What was done, for the document ("the msr module was loaded for this run …"), or why it could not be.
    pub note: Option<String>,
}

fn marker_pid() -> Option<u32> {
    std::fs::read_to_string(MARKER).ok()?.trim().parse().ok()
}

fn claim() {
    let _ = std::fs::create_dir_all("/run/rtgauge");
    let _ = std::fs::write(MARKER, std::process::id().to_string());
}

/// Why `modprobe` did not load or unload the module: what it said, or why it could not start.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ModprobeError(String);

fn modprobe(args: &[&str]) -> Result<(), ModprobeError> {
    let out = rtgauge_programs::command("modprobe")
        .args(args)
        .output()
        .map_err(|e| ModprobeError(rtgauge_programs::not_found("modprobe", &e)))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(ModprobeError(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

impl MsrDriver {
    /// Make `/dev/cpu/N/msr` exist for SMI counting: nothing where it does (unless a killed run loaded it:
    /// adopted), `modprobe msr` where it does not and this CPU counts SMIs.
    pub fn ensure() -> MsrDriver {
        let countable = !matches!(
            rtgauge_host::smi::read_platform(&rtgauge_host::HostRoot::live()),
            rtgauge_host::smi::SmiPlatform::NotCountable(_)
        );
        let present = Path::new("/dev/cpu/0/msr").exists() || Path::new("/sys/module/msr").exists();
        if present {
            let orphaned =
                marker_pid().is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
            if orphaned {
                claim();
            }
            return MsrDriver {
                owned: orphaned,
                note: None,
            };
        }
        if !countable {
            return MsrDriver {
                owned: false,
                note: None,
            };
        }
        match modprobe(&["msr"]) {
            Ok(()) => {
                claim();
                MsrDriver {
                    owned: true,
                    note: Some(
                        "the msr module was loaded to count SMIs and is unloaded when the run ends"
                            .into(),
                    ),
                }
            }
            Err(e) => MsrDriver {
                owned: false,
                note: Some(format!("modprobe msr: {e}")),
            },
        }
    }
}

impl Drop for MsrDriver {
    fn drop(&mut self) {
        if self.owned && marker_pid() == Some(std::process::id()) {
            // Another holder of /dev/cpu/N/msr (turbostat, a second run) keeps it loaded: modprobe -r then
            // fails, and the marker stays for a later run to adopt and unload once this one is gone.
            if modprobe(&["-r", "msr"]).is_ok() {
                let _ = std::fs::remove_file(MARKER);
            }
        }
    }
}
