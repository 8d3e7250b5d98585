//! `sandboxd install <dir>`: what a Kubernetes init container runs to put the daemon into a
//! volume the sandbox mounts.

use std::os::unix::fs::PermissionsExt;

#[test]
fn install_copies_the_daemon_into_a_directory_it_creates() {
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("opt/sa");
    let exe = env!("CARGO_BIN_EXE_sandboxd");
    for _ in 0..2 {
        // Twice: a second install replaces the first.
        let output = std::process::Command::new(exe)
            .arg("install")
            .arg(&target)
            .output()
            .unwrap();
        assert!(output.status.success(), "{output:?}");
        assert!(
            output.stdout.is_empty() && output.stderr.is_empty(),
            "{output:?}"
        );
    }
    let installed = target.join("sandboxd");
    assert_eq!(
        std::fs::read(&installed).unwrap(),
        std::fs::read(exe).unwrap()
    );
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o7777, 0o755);
    // Nothing but the daemon is left behind (no temporary file).
    let names: Vec<_> = std::fs::read_dir(&target)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["sandboxd"]);
    let version = std::process::Command::new(&installed)
        .arg("version")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&version.stdout).starts_with("sandboxd "));
}
