//! Files people send in are bounded: a YAML alias bomb, YAML, XML and TOML nested beyond reason and 1 GB files given to
//! every verb that reads a user file (.vmx, libvirt XML, Kubernetes YAML, TOML profile, import) are refused
//! with one clear line and exit 2, in well under a second, without the memory to hold them. Peak RSS is
//! that of the children (getrusage RUSAGE_CHILDREN), so this test has a binary of its own.
#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

mod common;

fn rtgauge(args: &[&str]) -> (i32, String, Duration) {
    let t = Instant::now();
    let o = common::rtgauge_std().args(args).output().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stderr).into_owned(),
        t.elapsed(),
    )
}

#[test]
fn hostile_user_files_are_refused_quickly_and_in_little_memory() {
    let dir = tempfile::tempdir().unwrap();
    // yaml-rust2's own scanner refuses nesting beyond 256 levels; nine levels of anchors, each naming the previous nine times: 9^9 (387 M) nodes once expanded.
    let mut bomb = String::from("apiVersion: v1\nkind: Pod\nmetadata:\n  name: lol\n");
    bomb.push_str("x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for i in 1..9 {
        let p = format!("*a{}", i - 1);
        bomb.push_str(&format!("x{i}: &a{i} [{}]\n", vec![p; 9].join(", ")));
    }
    assert!(bomb.lines().count() <= 14);
    let bomb_path = dir.path().join("bomb.yaml");
    std::fs::write(&bomb_path, &bomb).unwrap();
    let deep_path = dir.path().join("deep.yaml");
    std::fs::write(&deep_path, "[".repeat(100_000)).unwrap();
    // XML and TOML nested beyond reason (the XML parser recurses per level: this would exhaust the stack),
    // one with "/>" inside attribute values that a naive depth count would take for closing tags.
    let deep_xml = dir.path().join("deep.xml");
    std::fs::write(
        &deep_xml,
        format!(
            "<domain>{}{}</domain>",
            "<a x=\"/>\">".repeat(50_000),
            "</a>".repeat(50_000)
        ),
    )
    .unwrap();
    let deep_toml = dir.path().join("deep.toml");
    std::fs::write(
        &deep_toml,
        format!("a = {}{}", "[".repeat(50_000), "]".repeat(50_000)),
    )
    .unwrap();
    let huge = |name: &str| {
        let p = dir.path().join(name);
        std::fs::File::create(&p).unwrap().set_len(1 << 30).unwrap();
        p.to_str().unwrap().to_string()
    };
    let (vmx, xml, yaml, toml, json) = (
        huge("big.vmx"),
        huge("big.xml"),
        huge("big.yaml"),
        huge("big.toml"),
        huge("big.json"),
    );
    let db = dir.path().join("r.db");
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["audit", "--k8s", bomb_path.to_str().unwrap()],
            "alias bomb",
        ),
        (
            vec!["audit", "--k8s", deep_path.to_str().unwrap()],
            "recursion limit",
        ),
        (
            vec!["audit", "--libvirt", deep_xml.to_str().unwrap()],
            "nested more than 256",
        ),
        (
            vec![
                "run",
                "--profile",
                deep_toml.to_str().unwrap(),
                "--db",
                db.to_str().unwrap(),
            ],
            "max recursion depth",
        ),
        (vec!["audit", "--vmx", &vmx], "larger than 16 MiB"),
        (vec!["audit", "--libvirt", &xml], "larger than 16 MiB"),
        (vec!["audit", "--k8s", &yaml], "larger than 16 MiB"),
        (
            vec!["run", "--profile", &toml, "--db", db.to_str().unwrap()],
            "larger than 16 MiB",
        ),
        (
            vec!["import", &json, "--db", db.to_str().unwrap()],
            "larger than 256 MiB",
        ),
    ];
    for (args, why) in &cases {
        let (code, err, took) = rtgauge(args);
        eprintln!("{args:?}: exit {code} in {took:?}: {}", err.trim());
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(why), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(took < Duration::from_secs(1), "{args:?} took {took:?}");
    }
    // SAFETY: getrusage fills a struct we own.
    let peak_kib = unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        assert_eq!(libc::getrusage(libc::RUSAGE_CHILDREN, &mut u), 0);
        u.ru_maxrss
    };
    eprintln!("peak RSS of the children: {} KiB", peak_kib);
    assert!(peak_kib < 100 * 1024, "peak RSS {peak_kib} KiB");
}
