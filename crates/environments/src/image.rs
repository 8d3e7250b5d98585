//! What keys a build and what it tags, as pure functions: same deployment, base image and
//! packages, same digest, same image, whichever backend builds it.

use sandbox_agents_domain::environment::Packages;
use sha2::{Digest, Sha256};

/// The repository of built environment images.
pub const IMAGE_REPO: &str = "sandbox-agents-env";

/// The digest of what a build is made from: the deployment (images are the deployment's
/// own), the base image and the packages. Same inputs, same digest, same image.
pub fn build_digest(deployment: &str, base_image: &str, packages: &Packages) -> String {
    let input = serde_json::json!({
        "v": 1,
        "deployment": deployment,
        "base_image": base_image,
        "packages": packages,
    });
    hex::encode(Sha256::digest(input.to_string().as_bytes()))
}

/// The image a build of `digest` tags.
pub fn image_for(digest: &str) -> String {
    format!("{IMAGE_REPO}:{}", &digest[..32])
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
    fn the_digest_keys_on_the_base_and_the_packages() {
        let a = build_digest("d", "base:1", &packages());
        assert_eq!(a, build_digest("d", "base:1", &packages()));
        assert_ne!(a, build_digest("d", "base:2", &packages()));
        assert_ne!(a, build_digest("d", "base:1", &Packages::default()));
        assert_eq!(a.len(), 64);
        assert!(image_for(&a).starts_with("sandbox-agents-env:"));
    }
}
