//! `s3_mount` entries: a bucket prefix read by the control plane with its own S3 client and
//! staged into the workspace as plain files (`stage.rs`), written back from a writable mount
//! at stop and snapshot (`write_back.rs`). The sandbox never holds a credential of the
//! bucket: only the control plane talks to S3, so there is nothing in the sandbox to leak.
//!
//! What was staged is recorded per session (the store's `s3_mounts`, with each object's size,
//! sha256 and ETag), so that a write-back uploads only files whose content changed and deletes
//! only keys that were staged and whose file is gone. Every write is conditional on the
//! object being as it was staged (`If-Match` on its ETag, `If-None-Match: *` for a new key):
//! what someone else wrote to the bucket meanwhile is never overwritten or deleted. The
//! sandbox's version of such a file is kept beside it as a conflict copy instead, and the
//! session's log says so (`session.s3_conflict`).

mod addressing;
mod stage;
mod store;
mod write_back;

pub use addressing::check;
pub use stage::stage;
pub use store::S3Store;
use store::SharedCredentials;
pub use write_back::{write_back, Conflict, WriteBack};

use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::path::Path as ObjectPath;
use object_store::RetryConfig;
use object_store::{Certificate, ClientOptions};
use sandbox_agents_domain::ca::ExtraCaCerts;
use sandbox_agents_domain::manifest::{EntrySpec, ManifestSpec};
use sandbox_agents_errors::ServiceError;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Most bytes a prefix may hold to be staged, unless the server says otherwise (1 GiB).
pub const DEFAULT_STAGE_MAX_BYTES: u64 = 1 << 30;

/// How the control plane reaches S3: `--s3-endpoint`, `--s3-region`, `--s3-addressing-style`,
/// `--s3-proxy` and the standard AWS variables. `Debug` never shows the secret key, the session
/// token or the proxy's password.
#[derive(Clone, Default)]
pub struct S3Settings {
    /// An S3-compatible endpoint (`http://` allowed); `None`: AWS itself.
    pub endpoint: Option<String>,
    pub region: String,
    /// `--s3-addressing-style virtual`: buckets are addressed by host name
    /// (`bucket.endpoint`) rather than by path (`endpoint/bucket`).
    pub virtual_hosted: bool,
    /// `--s3-proxy`: an HTTP(S) proxy for the S3 client's requests only (S3 and STS; never the
    /// instance's, task's or pod's credential endpoints). Without it the standard `HTTPS_PROXY`
    /// applies, to every client of the server.
    pub proxy: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    /// Where credentials come from when no static keys are given.
    pub ambient: Option<AmbientCredentials>,
    /// A prefix holding more bytes than this is refused at boot.
    pub stage_max_bytes: u64,
    /// `--extra-ca-certs`: trusted besides the system's roots, for an S3-compatible store
    /// behind a private CA.
    pub extra_ca: Option<ExtraCaCerts>,
}

impl fmt::Debug for S3Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("S3Settings")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("virtual_hosted", &self.virtual_hosted)
            .field("proxy", &self.proxy.as_deref().map(addressing::shown_proxy))
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "***"),
            )
            .field("session_token", &self.session_token.as_ref().map(|_| "***"))
            .field("ambient", &self.ambient)
            .field("stage_max_bytes", &self.stage_max_bytes)
            .field("extra_ca", &self.extra_ca.as_ref().map(ExtraCaCerts::count))
            .finish()
    }
}

/// The credential sources of the AWS SDKs that are not static keys, for a control plane that
/// runs with a role (EKS, ECS, EC2). Each is chosen only when its variables are set, or for
/// the instance metadata service when the operator asks (`--s3-instance-credentials`), so
/// that a server with no credentials at all refuses a mount at once instead of waiting on a
/// metadata service that is not there. Resolved in the order of the SDKs' default chain.
/// The credentials they yield are temporary: the client refreshes them before they expire
/// and shares one cache across buckets ([`S3Client`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AmbientCredentials {
    /// AssumeRoleWithWebIdentity (EKS service-account roles and the like):
    /// `AWS_WEB_IDENTITY_TOKEN_FILE` and `AWS_ROLE_ARN`, which the client reads itself;
    /// `AWS_ENDPOINT_URL_STS` (https only) and `AWS_ROLE_SESSION_NAME` optional.
    WebIdentity {
        sts_endpoint: Option<String>,
        session_name: Option<String>,
    },
    /// An ECS task's role: `AWS_CONTAINER_CREDENTIALS_RELATIVE_URI` (on 169.254.170.2).
    EcsTask { relative_uri: String },
    /// EKS Pod Identity: `AWS_CONTAINER_CREDENTIALS_FULL_URI`, authorised with the token in
    /// `AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE`.
    PodIdentity {
        full_uri: String,
        token_file: String,
    },
    /// The EC2 instance profile over IMDSv2, at `AWS_EC2_METADATA_SERVICE_ENDPOINT` or the
    /// standard 169.254.169.254.
    Instance { metadata_endpoint: Option<String> },
}

impl AmbientCredentials {
    /// A name for messages and logs.
    pub fn describe(&self) -> &'static str {
        match self {
            AmbientCredentials::WebIdentity { .. } => "web identity (AWS_WEB_IDENTITY_TOKEN_FILE)",
            AmbientCredentials::EcsTask { .. } => "the ECS task role",
            AmbientCredentials::PodIdentity { .. } => "EKS Pod Identity",
            AmbientCredentials::Instance { .. } => "the EC2 instance profile",
        }
    }

    fn configure(&self, b: AmazonS3Builder) -> AmazonS3Builder {
        match self {
            AmbientCredentials::WebIdentity {
                sts_endpoint,
                session_name,
            } => {
                let b = match sts_endpoint {
                    Some(e) => b.with_config(AmazonS3ConfigKey::StsEndpoint, e),
                    None => b,
                };
                match session_name {
                    Some(n) => b.with_config(AmazonS3ConfigKey::RoleSessionName, n),
                    None => b,
                }
            }
            AmbientCredentials::EcsTask { relative_uri } => b.with_config(
                AmazonS3ConfigKey::ContainerCredentialsRelativeUri,
                relative_uri,
            ),
            AmbientCredentials::PodIdentity {
                full_uri,
                token_file,
            } => b
                .with_config(AmazonS3ConfigKey::ContainerCredentialsFullUri, full_uri)
                .with_config(
                    AmazonS3ConfigKey::ContainerAuthorizationTokenFile,
                    token_file,
                ),
            AmbientCredentials::Instance { metadata_endpoint } => match metadata_endpoint {
                Some(e) => b.with_metadata_endpoint(e),
                None => b,
            },
        }
    }
}

/// One `s3_mount` entry of a manifest, normalised: where it goes and what it reads.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mount {
    /// Workspace-relative, normalised (`a/b`).
    pub path: String,
    pub bucket: String,
    /// Without leading or trailing `/`; `""` is the whole bucket.
    pub prefix: String,
    pub read_only: bool,
}

impl Mount {
    /// `s3://bucket/prefix`, for messages.
    pub fn url(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.prefix)
    }

    /// The object key of a file at `rel` inside the mount.
    pub(crate) fn key(&self, rel: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(rel)
        } else {
            ObjectPath::from(format!("{}/{rel}", self.prefix))
        }
    }

    /// A refusal a person can act on, naming the entry, the bucket and the prefix.
    pub(crate) fn refused(&self, reason: impl fmt::Display) -> ServiceError {
        ServiceError::BadRequest(format!(
            "s3_mount '{}' ({}): {reason}",
            self.path,
            self.url()
        ))
    }
}

/// An object as staged: its key relative to the mount's prefix, its size and the sha256 of
/// the bytes the sandbox got, and the ETag of the object in the bucket they correspond to
/// (what a write-back's conditional requests compare with; `None` in records written before
/// ETags were kept, which are written back unconditionally).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StagedObject {
    pub key: String,
    pub size: u64,
    pub sha256: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub e_tag: Option<String>,
}

/// The manifest's `s3_mount` entries, in path order.
pub fn mounts(manifest: &ManifestSpec) -> Vec<Mount> {
    manifest
        .entries
        .iter()
        .filter_map(|(path, entry)| match entry {
            EntrySpec::S3Mount {
                bucket,
                prefix,
                read_only,
                ..
            } => Some(Mount {
                path: crate::manifest::normalise(path),
                bucket: bucket.trim().to_owned(),
                prefix: prefix
                    .as_deref()
                    .unwrap_or("")
                    .split('/')
                    .filter(|c| !c.is_empty())
                    .collect::<Vec<_>>()
                    .join("/"),
                read_only: *read_only,
            }),
            _ => None,
        })
        .collect()
}

/// The control plane's S3 client: one store per bucket, built on demand, all of them sharing
/// the first one's credential provider, so temporary credentials (a role's) are fetched once
/// and refreshed before they expire rather than fetched again for every mount and boot.
/// `Debug` shows no credential (see `store.rs`).
#[derive(Clone, Debug)]
pub struct S3Client {
    settings: S3Settings,
    credentials: Arc<OnceLock<SharedCredentials>>,
}

impl S3Client {
    pub fn new(settings: S3Settings) -> Self {
        S3Client {
            settings,
            credentials: Arc::default(),
        }
    }

    pub fn settings(&self) -> &S3Settings {
        &self.settings
    }

    /// The store of `mount`'s bucket. Without keys the boot fails here rather than waiting on
    /// an instance-metadata service that is not there.
    pub(crate) fn store(&self, mount: &Mount) -> Result<S3Store, ServiceError> {
        let store = build_store(&self.settings, &mount.bucket, self.credentials.get())
            .map_err(|e| mount.refused(e))?;
        self.credentials.get_or_init(|| store.credentials());
        Ok(store)
    }
}

/// A client of `bucket` with the control plane's S3 settings (its endpoint, region and
/// credentials), for `s3_mount` entries and the blob store alike; with `shared`, that
/// provider's credentials instead of a provider of its own.
pub(crate) fn build_store(
    s: &S3Settings,
    bucket: &str,
    shared: Option<&SharedCredentials>,
) -> Result<S3Store, String> {
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(bucket)
        .with_region(&s.region)
        .with_retry(RetryConfig {
            max_retries: 3,
            retry_timeout: Duration::from_secs(30),
            ..Default::default()
        });
    b = match (shared, &s.access_key_id, &s.secret_access_key, &s.ambient) {
        (Some(provider), ..) => b.with_credentials(provider.0.clone()),
        (None, Some(key), Some(secret), _) => {
            let b = b.with_access_key_id(key).with_secret_access_key(secret);
            match &s.session_token {
                Some(token) => b.with_token(token),
                None => b,
            }
        }
        (None, None, None, Some(ambient)) => ambient.configure(b),
        _ => {
            return Err(
                "this server has no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY for the server (never in the sandbox), run it with a role (AWS_WEB_IDENTITY_TOKEN_FILE, AWS_CONTAINER_CREDENTIALS_*), or use the instance profile with --s3-instance-credentials".into(),
            )
        }
    };
    b = b.with_virtual_hosted_style_request(s.virtual_hosted);
    // One set of client options, given last: `with_client_options` replaces whatever the
    // builder's own setters (`with_allow_http` among them) put there before.
    let mut options = ClientOptions::new();
    if let Some(endpoint) = addressing::bucket_endpoint(s, bucket)? {
        options = options.with_allow_http(endpoint.starts_with("http://"));
        b = b.with_endpoint(endpoint);
    }
    if let Some(ca) = &s.extra_ca {
        for cert in Certificate::from_pem_bundle(ca.pem().as_bytes())
            .map_err(|e| format!("the extra CA certificates (--extra-ca-certs): {e}"))?
        {
            options = options.with_root_certificate(cert);
        }
    }
    if let Some(proxy) = &s.proxy {
        options = options
            .with_proxy_url(proxy)
            .with_proxy_excludes(addressing::proxy_excludes(s));
    }
    let store = b
        .with_client_options(options)
        .build()
        .map_err(|e| e.to_string())?;
    Ok(S3Store::new(bucket, store))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_never_show_their_secrets() {
        let s = S3Settings {
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("wJalrXUtnFEMI".into()),
            session_token: Some("tok-secret".into()),
            ..Default::default()
        };
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("wJalrXUtnFEMI") && !shown.contains("tok-secret"),
            "{shown}"
        );
        assert!(shown.contains("AKIDEXAMPLE"));
    }

    #[test]
    fn clients_never_show_their_secrets_or_the_proxy_password() {
        let s = S3Settings {
            access_key_id: Some("AKIDEXAMPLE".into()),
            secret_access_key: Some("wJalrXUtnFEMI".into()),
            session_token: Some("tok-secret".into()),
            proxy: Some("http://proxyuser:pr0xy-pass@proxy.internal:3128".into()),
            region: "us-east-1".into(),
            ..Default::default()
        };
        let client = S3Client::new(s);
        let mount = Mount {
            path: "data".into(),
            bucket: "the-bucket".into(),
            prefix: String::new(),
            read_only: true,
        };
        let store = client.store(&mount).unwrap();
        for shown in [
            format!("{store:?}"),
            format!("{store}"),
            format!("{client:?}"),
            format!(
                "{:?}",
                std::sync::Arc::new(store) as std::sync::Arc<dyn object_store::ObjectStore>
            ),
        ] {
            for secret in ["wJalrXUtnFEMI", "tok-secret", "pr0xy-pass"] {
                assert!(!shown.contains(secret), "{secret} shown in {shown}");
            }
        }
    }

    #[test]
    fn mounts_are_normalised_and_keys_sit_under_the_prefix() {
        let m: ManifestSpec = serde_json::from_str(
            r#"{"entries":{"./data//in/":{"kind":"s3_mount","bucket":"b","prefix":"/p/q/"},"a":{"kind":"file","content":"x"}}}"#,
        )
        .unwrap();
        let got = mounts(&m);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].path, "data/in");
        assert_eq!(got[0].prefix, "p/q");
        assert!(got[0].read_only);
        assert_eq!(got[0].key("x/y.txt").as_ref(), "p/q/x/y.txt");
        let whole = Mount {
            prefix: String::new(),
            ..got[0].clone()
        };
        assert_eq!(whole.key("y.txt").as_ref(), "y.txt");
    }
}
