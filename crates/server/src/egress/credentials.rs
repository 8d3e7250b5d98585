//! The credentials a session's boot bound for egress (`credentials::egress`), as the proxy
//! applies them to the sandbox's HTTPS requests.

use sandbox_agents_credentials::Credentials;
use sandbox_agents_domain::secret_binding::{EgressCredential, EgressCredentialKind};
use sandbox_agents_domain::SessionId;
use sandbox_agents_egress::Credential;

/// The proxy's credentials from what the boot sealed (`None`: it bound none). What cannot be
/// opened or applied is logged and left out, never shown: the request then goes without it,
/// and the host answers it as it answers any request without the credential.
pub(super) fn bound(
    credentials: &Credentials,
    session: SessionId,
    sealed: Option<&[u8]>,
) -> Vec<Credential> {
    let Some(sealed) = sealed else {
        return Vec::new();
    };
    match credentials.open_egress(session, sealed) {
        Ok(bound) => bound.iter().filter_map(|c| for_proxy(session, c)).collect(),
        Err(e) => {
            tracing::warn!(session.id = %session, error = %e, "the session's egress credentials cannot be opened; its requests go without them");
            Vec::new()
        }
    }
}

fn for_proxy(session: SessionId, c: &EgressCredential) -> Option<Credential> {
    let (made, what) = match &c.kind {
        EgressCredentialKind::Inject { header, value } => (
            Credential::inject(&c.hosts, header, value),
            format!("an inject binding ({header})"),
        ),
        EgressCredentialKind::Swap { placeholder, value } => (
            Credential::swap(&c.hosts, placeholder, value),
            "a placeholder binding".to_owned(),
        ),
    };
    // The reason names the header or says what is wrong with the value, never the value.
    made.map_err(|why| {
        tracing::warn!(session.id = %session, binding = %what, hosts = ?c.hosts, reason = %why, "a secret bound for egress cannot be applied; its requests go without it");
    })
    .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use sandbox_agents_vault::MasterKey;

    fn credentials() -> Credentials {
        // A pool that never connects: opening sealed values needs only the key.
        let db = sqlx::postgres::PgPoolOptions::new()
            .connect_lazy("postgres://nobody@localhost/none")
            .unwrap();
        Credentials::new(
            db,
            MasterKey::random(),
            std::env::temp_dir().join("known_hosts"),
        )
    }

    #[tokio::test]
    async fn a_secret_that_cannot_stand_in_a_header_is_skipped_and_the_rest_apply() {
        let creds = credentials();
        let session = SessionId::new();
        let list = vec![
            EgressCredential {
                hosts: vec!["a.test".into()],
                kind: EgressCredentialKind::Inject {
                    header: "Authorization".into(),
                    value: "Bearer line\nbreak".into(),
                },
            },
            EgressCredential {
                hosts: vec!["a.test".into()],
                kind: EgressCredentialKind::Swap {
                    placeholder: "sa-ph-x".into(),
                    value: "v".into(),
                },
            },
            EgressCredential {
                hosts: vec!["a.test".into()],
                kind: EgressCredentialKind::Swap {
                    placeholder: "sa-ph-y".into(),
                    value: "line\nbreak".into(),
                },
            },
        ];
        let sealed =
            sandbox_agents_credentials::egress::seal_egress(creds.master_key(), session, &list)
                .unwrap();
        let applied = bound(&creds, session, sealed.as_deref());
        assert_eq!(applied.len(), 1);
        assert!(applied[0].applies_to("a.test"));
        assert!(bound(&creds, session, None).is_empty());
        assert!(
            bound(&creds, SessionId::new(), sealed.as_deref()).is_empty(),
            "sealed for another session"
        );
    }
}
