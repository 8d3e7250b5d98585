//! An [`ImageRecipe`](crate::ImageRecipe) as the Engine builds it, as pure functions: the
//! Dockerfile that installs the packages (apt, cargo, gem, go, npm, pip, in that order), the
//! context it is sent with, and how to read which step a line of the Engine's output starts.
//!
//! Managers other than apt and pip need their tool in the base image: the step checks for
//! it and fails saying the image lacks it (installing toolchains behind the caller's back
//! would make a build of `npm: [...]` silently pull a second language's runtime; name an
//! image that has it, or add the toolchain to `apt`, which installs first). apt, cargo,
//! gem, go and npm install as root into system paths (`/usr/local/bin` for cargo and go);
//! pip installs as the sandbox user (`pip install --user`), as a session would.

use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_domain::environment::Packages;

/// Where the extra CA goes in the context and in the image.
const CA_FILE: &str = "sandbox-agents-extra-ca.pem";
const CA_PATH: &str = "/usr/local/share/sandbox-agents/extra-ca.pem";
/// The system bundle every tool of a Debian image reads.
const SYSTEM_BUNDLE: &str = "/etc/ssl/certs/ca-certificates.crt";
/// What each install step starts with, so the log (and the error) says whose step failed.
const STEP_MARKER: &str = ": manager=";
/// What a step prints when its manager's tool is missing.
pub(super) const MISSING_MARKER: &str = "sandbox-agents: ";

fn quoted(entries: &[String]) -> String {
    // Entries are checked single words without quotes (`domain::environment`).
    entries
        .iter()
        .map(|e| format!("'{e}'"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn require(tool: &str, manager: &str, base: &str) -> String {
    format!(
        "command -v {tool} >/dev/null 2>&1 || {{ echo \"{MISSING_MARKER}the base image {base} has no {tool}, so {manager} packages cannot be installed; use an image that has it (config.image) or install it with apt\" >&2; exit 127; }}"
    )
}

/// The Dockerfile: the extra CA first (so apt and pip trust the inspecting proxy), then one
/// `RUN` per manager with packages, then back to the sandbox user.
pub(super) fn dockerfile(base: &str, packages: &Packages, ca: Option<&ExtraCaCerts>) -> String {
    let mut f = format!("FROM {base}\nUSER root\n");
    let tls_env = if ca.is_some() {
        f.push_str(&format!("COPY {CA_FILE} {CA_PATH}\n"));
        f.push_str(&format!("RUN cat {CA_PATH} >> {SYSTEM_BUNDLE}\n"));
        format!("PIP_CERT={SYSTEM_BUNDLE} SSL_CERT_FILE={SYSTEM_BUNDLE} REQUESTS_CA_BUNDLE={SYSTEM_BUNDLE} ")
    } else {
        String::new()
    };
    let step =
        |manager: &str, body: String| format!("RUN {STEP_MARKER}{manager}; set -e; {body}\n");
    if !packages.apt.is_empty() {
        f.push_str(&step(
            "apt",
            format!(
                "export DEBIAN_FRONTEND=noninteractive; apt-get update; apt-get install -y --no-install-recommends {}; rm -rf /var/lib/apt/lists/*",
                quoted(&packages.apt)
            ),
        ));
    }
    if !packages.cargo.is_empty() {
        f.push_str(&step(
            "cargo",
            format!(
                "{}; {tls_env}CARGO_INSTALL_ROOT=/usr/local cargo install {}",
                require("cargo", "cargo", base),
                quoted(&packages.cargo)
            ),
        ));
    }
    if !packages.gem.is_empty() {
        // `rails:7.1.0` is gem's own `name:version` syntax for `gem install`.
        f.push_str(&step(
            "gem",
            format!(
                "{}; {tls_env}gem install --no-document {}",
                require("gem", "gem", base),
                quoted(&packages.gem)
            ),
        ));
    }
    if !packages.go.is_empty() {
        let versioned: Vec<String> = packages
            .go
            .iter()
            .map(|p| {
                if p.contains('@') {
                    p.clone()
                } else {
                    format!("{p}@latest")
                }
            })
            .collect();
        f.push_str(&step(
            "go",
            format!(
                "{}; {tls_env}GOBIN=/usr/local/bin go install {}",
                require("go", "go", base),
                quoted(&versioned)
            ),
        ));
    }
    if !packages.npm.is_empty() {
        f.push_str(&step(
            "npm",
            format!(
                "{}; {}npm install -g {}",
                require("npm", "npm", base),
                if ca.is_some() {
                    format!("NODE_EXTRA_CA_CERTS={CA_PATH} ")
                } else {
                    String::new()
                },
                quoted(&packages.npm)
            ),
        ));
    }
    f.push_str("USER sandbox\n");
    if !packages.pip.is_empty() {
        f.push_str(&step(
            "pip",
            format!(
                "python3 -m pip --version >/dev/null 2>&1 || {{ echo \"{MISSING_MARKER}the base image {base} has no pip (python3 -m pip), so pip packages cannot be installed; use an image that has it or install python3-pip with apt\" >&2; exit 127; }}; {tls_env}python3 -m pip install --user --no-cache-dir --no-warn-script-location {}",
                quoted(&packages.pip)
            ),
        ));
    }
    f
}

/// The build context: an uncompressed tar of the Dockerfile and the extra CA.
pub(super) fn context(dockerfile: &str, ca: Option<&ExtraCaCerts>) -> std::io::Result<Vec<u8>> {
    let mut tar = tar::Builder::new(Vec::new());
    let mut add = |name: &str, data: &[u8]| {
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o644);
        h.set_mtime(0);
        h.set_cksum();
        tar.append_data(&mut h, name, data)
    };
    add("Dockerfile", dockerfile.as_bytes())?;
    if let Some(ca) = ca {
        add(CA_FILE, ca.pem().as_bytes())?;
    }
    tar.into_inner()
}

/// Which manager's step a log line starts (`Step 3/5 : RUN : manager=pip; ...`).
pub(super) fn step_manager(line: &str) -> Option<&str> {
    let rest = line.split(STEP_MARKER).nth(1)?;
    rest.split(';').next().map(str::trim)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packages() -> Packages {
        Packages {
            apt: vec!["jq".into()],
            npm: vec!["express@4.18.0".into()],
            pip: vec!["sqlalchemy==2.0.30".into()],
            ..Default::default()
        }
    }

    #[test]
    fn the_dockerfile_installs_in_manager_order_and_ends_as_the_sandbox_user() {
        let f = dockerfile("base:1", &packages(), None);
        let apt = f.find("manager=apt").unwrap();
        let npm = f.find("manager=npm").unwrap();
        let pip = f.find("manager=pip").unwrap();
        assert!(apt < npm && npm < pip, "{f}");
        assert!(f.starts_with("FROM base:1\nUSER root\n"));
        assert!(f.contains("apt-get install -y --no-install-recommends 'jq'"));
        assert!(f.contains("npm install -g 'express@4.18.0'"));
        assert!(f.contains(
            "pip install --user --no-cache-dir --no-warn-script-location 'sqlalchemy==2.0.30'"
        ));
        // pip runs as the sandbox user, after the root steps.
        assert!(f.find("USER sandbox").unwrap() < pip);
        assert!(!f.contains("PIP_CERT"), "no CA, no CA variables");
    }

    #[test]
    fn the_extra_ca_is_trusted_before_any_package_is_fetched() {
        let ca = ExtraCaCerts::parse(
            "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUJ5c3p3u7Gm6m8n0fWq6xJ1q9G0wwCgYIKoZIzj0EAwIw\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let f = dockerfile("base:1", &packages(), Some(&ca));
        let appended = f.find(">> /etc/ssl/certs/ca-certificates.crt").unwrap();
        assert!(appended < f.find("manager=apt").unwrap());
        assert!(f.contains("PIP_CERT=/etc/ssl/certs/ca-certificates.crt"));
        let tar = context(&f, Some(&ca)).unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().display().to_string())
            .collect();
        assert_eq!(names, ["Dockerfile", CA_FILE]);
    }

    #[test]
    fn a_step_line_names_its_manager() {
        assert_eq!(
            step_manager("Step 3/5 : RUN : manager=pip; set -e; x"),
            Some("pip")
        );
        assert_eq!(step_manager("Step 1/5 : FROM base"), None);
    }
}
