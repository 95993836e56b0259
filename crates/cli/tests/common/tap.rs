//! A host tap interface for a lab guest's NIC (`rtgauge_lab::Guest::tap`): created and brought up with
//! iproute2, removed when dropped (also when the test panics). Needs root.

use super::program;

/// A tap interface on this host, removed when dropped.
pub struct Tap {
    /// The interface's name.
    pub name: String,
}

impl Tap {
    /// Create tap `name` (after removing a leftover of the same name, a killed run's) and bring it up.
    pub fn create(name: &str) -> Tap {
        let _ = program("ip").args(["link", "del", name]).output();
        ip(&["tuntap", "add", "dev", name, "mode", "tap"]);
        // From here on the interface is removed on every path, a failed `up` included.
        let tap = Tap {
            name: name.to_string(),
        };
        ip(&["link", "set", name, "up"]);
        tap
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = program("ip").args(["link", "del", &self.name]).output();
    }
}

/// `ip ARGS`, which must succeed.
fn ip(args: &[&str]) {
    let out = program("ip").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr).trim()
    );
}
