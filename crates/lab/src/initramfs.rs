//! The guest's root file system: a newc cpio archive the kernel unpacks into its rootfs (no disk, no
//! modules). It holds busybox (static), `/init`, the test's script, and host programs with the shared
//! libraries `ldd` lists, at the paths the dynamic loader looks for them.

use crate::{io, run_program, LabError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What an archive entry holds.
#[derive(Debug, Clone)]
enum Node {
    Dir,
    File { data: Source, mode: u32 },
    Symlink(String),
}

#[derive(Debug, Clone)]
enum Source {
    Bytes(Vec<u8>),
    Host(PathBuf),
}

/// A root file system being assembled (paths without the leading `/`).
#[derive(Debug, Default, Clone)]
pub struct Initramfs {
    nodes: BTreeMap<String, Node>,
}

impl Initramfs {
    /// An empty tree.
    pub fn new() -> Initramfs {
        Initramfs::default()
    }

    /// The directory `path` and its parents.
    pub fn dir(&mut self, path: &str) {
        let mut acc = String::new();
        for part in path.trim_matches('/').split('/').filter(|p| !p.is_empty()) {
            if !acc.is_empty() {
                acc.push('/');
            }
            acc.push_str(part);
            self.nodes.entry(acc.clone()).or_insert(Node::Dir);
        }
    }

    fn parent(&mut self, path: &str) -> String {
        let p = path.trim_start_matches('/').to_string();
        if let Some((d, _)) = p.rsplit_once('/') {
            self.dir(d);
        }
        p
    }

    /// A file with these bytes.
    pub fn file(&mut self, path: &str, data: impl Into<Vec<u8>>, mode: u32) {
        let p = self.parent(path);
        self.nodes.insert(
            p,
            Node::File {
                data: Source::Bytes(data.into()),
                mode,
            },
        );
    }

    /// A file copied from the host when the archive is written.
    pub fn host_file(&mut self, path: &str, host: &Path, mode: u32) {
        let p = self.parent(path);
        self.nodes.insert(
            p,
            Node::File {
                data: Source::Host(host.to_path_buf()),
                mode,
            },
        );
    }

    /// A symbolic link.
    pub fn symlink(&mut self, path: &str, target: &str) {
        let p = self.parent(path);
        self.nodes.insert(p, Node::Symlink(target.to_string()));
    }

    /// A host program at `path` in the guest, with every shared library `ldd` lists at its own path.
    pub fn binary_with_libraries(&mut self, path: &str, host: &Path) -> Result<(), LabError> {
        self.host_file(path, host, 0o755);
        for lib in shared_libraries(host)? {
            let guest = lib.display().to_string();
            // The resolved file's bytes, under the name the loader asks for (libc.so.6, not libc-2.36.so).
            self.host_file(&guest, &lib, 0o755);
        }
        Ok(())
    }

    /// Whether `path` is in the tree.
    pub fn contains(&self, path: &str) -> bool {
        self.nodes.contains_key(path.trim_start_matches('/'))
    }

    /// Write the archive to `out`.
    pub fn write(&self, out: &Path) -> Result<(), LabError> {
        let f = std::fs::File::create(out).map_err(io(out))?;
        let mut w = std::io::BufWriter::new(f);
        for (ino, (name, node)) in self.nodes.iter().enumerate() {
            let b = cpio::newc::Builder::new(name)
                .ino(ino as u32 + 1)
                .nlink(1)
                .uid(0)
                .gid(0);
            let (b, data): (_, std::borrow::Cow<[u8]>) = match node {
                Node::Dir => (b.mode(0o040_755).nlink(2), Vec::new().into()),
                Node::Symlink(t) => (b.mode(0o120_777), t.as_bytes().into()),
                Node::File { data, mode } => {
                    let bytes: std::borrow::Cow<[u8]> = match data {
                        Source::Bytes(v) => v.as_slice().into(),
                        Source::Host(p) => std::fs::read(p).map_err(io(p))?.into(),
                    };
                    (b.mode(0o100_000 | mode), bytes)
                }
            };
            let size = u32::try_from(data.len()).map_err(|_| LabError::Io {
                path: name.clone(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "over 4 GiB"),
            })?;
            let mut writer = b.write(&mut w, size);
            std::io::Write::write_all(&mut writer, &data).map_err(io(out))?;
            writer.finish().map_err(io(out))?;
        }
        cpio::newc::trailer(&mut w).map_err(io(out))?;
        std::io::Write::flush(&mut w).map_err(io(out))?;
        Ok(())
    }
}

/// The shared libraries a program loads, as `ldd` lists them (the dynamic loader included).
pub fn shared_libraries(program: &Path) -> Result<Vec<PathBuf>, LabError> {
    let out = rtgauge_programs::command("ldd")
        .arg(program)
        .output()
        .map_err(|e| LabError::Program {
            program: "ldd".into(),
            message: rtgauge_programs::not_found("ldd", &e),
        })?;
    // A static program: ldd says so and exits 1.
    let text = String::from_utf8_lossy(&out.stdout);
    Ok(parse_ldd(&text))
}

/// The library paths of `ldd` output: `name => /path (0x…)` and `/lib64/ld-linux-x86-64.so.2 (0x…)`;
/// the vDSO and "not a dynamic executable" are no files.
pub fn parse_ldd(text: &str) -> Vec<PathBuf> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = match l.split_once("=>") {
                Some((_, r)) => r.trim(),
                None => l,
            };
            let path = path.split(" (").next()?.trim();
            path.starts_with('/').then(|| PathBuf::from(path))
        })
        .collect()
}

/// `program` without its debug sections (`objcopy --strip-debug`), cached beside the kernels under the
/// file's size and modification time: a debug build of rtgauge is ~62 MB (line tables only), ~39 MB
/// stripped, and the initramfs is unpacked at every boot.
pub fn stripped(program: &Path) -> Result<PathBuf, LabError> {
    let meta = std::fs::metadata(program).map_err(io(program))?;
    let mtime = meta
        .modified()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    let name = program
        .file_name()
        .map_or("program".into(), |n| n.to_string_lossy().into_owned());
    let dir = crate::cache_dir().join("stripped");
    std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    let out = dir.join(format!("{name}-{}-{mtime}", meta.len()));
    if out.is_file() {
        return Ok(out);
    }
    let tmp = dir.join(format!(".{name}-{}", std::process::id()));
    run_program(
        "objcopy",
        &[
            "--strip-debug",
            &program.display().to_string(),
            &tmp.display().to_string(),
        ],
    )?;
    std::fs::rename(&tmp, &out).map_err(io(&out))?;
    // Older builds of the same program are not needed any more.
    for e in std::fs::read_dir(&dir).map_err(io(&dir))?.flatten() {
        let n = e.file_name().to_string_lossy().into_owned();
        if n.starts_with(&format!("{name}-")) && e.path() != out {
            let _ = std::fs::remove_file(e.path());
        }
    }
    Ok(out)
}

/// Unpack a newc archive (what the guest hands back) into `dir`; the names of the files written. Paths
/// that would leave `dir` are refused.
pub fn unpack(archive: &[u8], dir: &Path) -> std::io::Result<Vec<String>> {
    let mut names = Vec::new();
    let mut rest: &[u8] = archive;
    loop {
        let r = cpio::newc::Reader::new(rest)?;
        if r.entry().is_trailer() {
            return Ok(names);
        }
        let name = r.entry().name().trim_start_matches("./").to_string();
        let mode = r.entry().mode();
        let safe = !name.is_empty()
            && name != "."
            && !name.starts_with('/')
            && !name.split('/').any(|p| p == "..");
        if !safe {
            rest = r.finish()?;
            continue;
        }
        let path = dir.join(&name);
        match mode & 0o170_000 {
            0o040_000 => {
                std::fs::create_dir_all(&path)?;
                rest = r.finish()?;
            }
            0o100_000 => {
                if let Some(p) = path.parent() {
                    std::fs::create_dir_all(p)?;
                }
                let f = std::fs::File::create(&path)?;
                rest = r.to_writer(f)?;
                names.push(name);
            }
            _ => rest = r.finish()?,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_output_names_the_files() {
        let text = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibtracefs.so.1 => /lib/x86_64-linux-gnu/libtracefs.so.1 (0x1)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x2)\n\t/lib64/ld-linux-x86-64.so.2 (0x3)\n";
        let libs = parse_ldd(text);
        assert_eq!(
            libs,
            [
                PathBuf::from("/lib/x86_64-linux-gnu/libtracefs.so.1"),
                PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"),
                PathBuf::from("/lib64/ld-linux-x86-64.so.2")
            ]
        );
        assert!(parse_ldd("\tnot a dynamic executable\n").is_empty());
        assert!(parse_ldd("\tlibx.so => not found\n").is_empty());
    }

    #[test]
    fn an_archive_round_trips_and_hostile_names_stay_inside() {
        let dir = tempfile::tempdir().unwrap();
        let mut fs = Initramfs::new();
        fs.file("/out/lab/status", "0\n", 0o644);
        fs.file("out/a.json", "{}", 0o644);
        fs.symlink("/bin/sh", "busybox");
        fs.file("../escape", "x", 0o644);
        assert!(fs.contains("out/lab"), "parents are made");
        let cpio = dir.path().join("x.cpio");
        fs.write(&cpio).unwrap();
        let bytes = std::fs::read(&cpio).unwrap();
        let into = dir.path().join("into");
        std::fs::create_dir(&into).unwrap();
        let mut names = unpack(&bytes, &into).unwrap();
        names.sort();
        assert_eq!(names, ["out/a.json", "out/lab/status"]);
        assert_eq!(
            std::fs::read_to_string(into.join("out/lab/status")).unwrap(),
            "0\n"
        );
        assert!(!dir.path().join("escape").exists());
        // A truncated archive is an error, not a panic.
        assert!(unpack(&bytes[..bytes.len() / 2], &into).is_err());
    }
}
