//! People: the accounts that sign in to the web UI, their passwords (argon2id), their browser
//! sessions and their single-use recovery codes. Sessions and codes are random secrets shown
//! once and stored as SHA-256 hashes (`sandbox_agents_vault::tokens`); operators never set
//! anyone's password, they issue a recovery code.

use crate::Credentials;
use sandbox_agents_domain::identity::{
    password_problem, Profile, ProfileProject, UserCreate, UserPatch,
};
use sandbox_agents_domain::{ProjectId, Violations};
use sandbox_agents_errors::{Result, ServiceError};
use sandbox_agents_store::people::{self, PersonRecord};
use sandbox_agents_store::projects;
use sandbox_agents_vault::tokens;
use time::{Duration, OffsetDateTime};
use uuid::Uuid;

/// How long a browser session lasts.
pub const SESSION_TTL: Duration = Duration::days(7);
/// How long a recovery secret works.
pub const RECOVERY_TTL: Duration = Duration::hours(24);

/// A browser session just opened for a person.
pub struct SignedIn {
    pub person: Uuid,
    /// The session's secret, for the cookie; only its hash is stored.
    pub token: String,
}

/// A new account, with the recovery code that sets its first password when it was made
/// without one.
pub struct PersonCreated {
    pub person: PersonRecord,
    pub recovery_code: Option<String>,
}

/// The form an email is looked up and counted in (sign-in attempts are limited per account).
pub fn normalize_email(email: &str) -> String {
    email.trim().to_lowercase()
}

fn vault_error(e: sandbox_agents_vault::VaultError) -> ServiceError {
    ServiceError::Internal(e.into())
}

/// An argon2id PHC string for `password`, on a blocking thread: it is slow on purpose.
async fn hash_password(password: String) -> Result<String> {
    tokio::task::spawn_blocking(move || tokens::hash_password(&password))
        .await
        .map_err(|e| ServiceError::Internal(e.into()))?
        .map_err(vault_error)
}

/// Whether `password` matches `hash` (false for a malformed hash), off the async threads.
async fn verify_password(password: String, hash: String) -> bool {
    tokio::task::spawn_blocking(move || tokens::verify_password(&password, &hash))
        .await
        .unwrap_or(false)
}

impl Credentials {
    /// Checks `email` and `password`: a session for an active person whose password matches,
    /// `None` otherwise. An unknown email costs the same time as a wrong password, so the
    /// answer's timing does not tell which accounts exist.
    #[tracing::instrument(skip_all)]
    pub async fn sign_in(&self, email: &str, password: String) -> Result<Option<SignedIn>> {
        let found = people::credentials(&self.db, &normalize_email(email)).await?;
        let person = match found {
            Some((person, Some(hash))) if person.state == "active" => {
                verify_password(password, hash).await.then_some(person)
            }
            _ => {
                let _ = hash_password(password).await;
                None
            }
        };
        let Some(person) = person else {
            tracing::info!("a sign-in failed");
            return Ok(None);
        };
        let signed_in = self.open_session(person.id).await?;
        tracing::info!(person.id = %person.id, "signed in");
        Ok(Some(signed_in))
    }

    /// Ends the browser session whose secret is `token` (nothing when there is none).
    pub async fn sign_out(&self, token: &str) -> Result<()> {
        Ok(people::end_session(&self.db, &tokens::digest(token)).await?)
    }

    /// Sets the password of the person a recovery `code` was issued to, uses the code up and
    /// signs them in. `None` when the code is unknown, used or expired; a password too short
    /// is a validation error on `password`.
    #[tracing::instrument(skip_all)]
    pub async fn recover(&self, code: &str, password: String) -> Result<Option<SignedIn>> {
        if let Some(problem) = password_problem(&password) {
            return Err(ServiceError::field(
                &["password"],
                problem,
                serde_json::Value::from("***"),
            ));
        }
        let hash = hash_password(password).await?;
        let mut tx = self.db.begin().await?;
        let person = people::recover(&mut tx, &tokens::digest(code.trim()), &hash).await?;
        tx.commit().await?;
        let Some(person) = person else {
            return Ok(None);
        };
        let signed_in = self.open_session(person.id).await?;
        tracing::info!(person.id = %person.id, "password set through recovery");
        Ok(Some(signed_in))
    }

    /// Opens a browser session for `person`.
    async fn open_session(&self, person: Uuid) -> Result<SignedIn> {
        let token = tokens::new_secret().map_err(vault_error)?;
        people::add_session(
            &self.db,
            person,
            &tokens::digest(&token),
            OffsetDateTime::now_utc() + SESSION_TTL,
        )
        .await?;
        Ok(SignedIn { person, token })
    }

    /// Makes an account from `body` (validated here); an operator when asked, or when
    /// `operator` says the caller makes the first one (open mode). Without a password the
    /// answer carries a recovery code that sets one. A taken email is a conflict.
    #[tracing::instrument(skip_all)]
    pub async fn create_person(&self, body: &UserCreate, operator: bool) -> Result<PersonCreated> {
        let mut v = Violations::new();
        body.validate(&mut v);
        v.into_result().map_err(ServiceError::Validation)?;
        let hash = match body.password.clone() {
            Some(pw) => Some(hash_password(pw).await?),
            None => None,
        };
        let person = people::insert(
            &self.db,
            Uuid::now_v7(),
            body.email.trim(),
            body.name.trim(),
            hash.as_deref(),
            body.operator || operator,
        )
        .await?;
        let recovery_code = match hash {
            None => Some(self.new_recovery_code(person.id).await?),
            Some(_) => None,
        };
        tracing::info!(person.id = %person.id, "user created");
        Ok(PersonCreated {
            person,
            recovery_code,
        })
    }

    /// A fresh recovery code for `person` (a store `NotFound` when there is no such person).
    /// Issuing one never resets anything: the password works until the code is used.
    pub async fn issue_recovery(&self, person: Uuid) -> Result<String> {
        people::get(&self.db, person).await?;
        self.new_recovery_code(person).await
    }

    async fn new_recovery_code(&self, person: Uuid) -> Result<String> {
        let code = tokens::new_secret().map_err(vault_error)?;
        people::add_recovery_code(
            &self.db,
            person,
            &tokens::digest(&code),
            OffsetDateTime::now_utc() + RECOVERY_TTL,
        )
        .await?;
        Ok(code)
    }

    /// Deletes an account with its sessions and memberships (a store `NotFound` when there is
    /// none). With `keep_an_operator` (no shared token is configured, so people are the only
    /// operators) the last operator cannot be deleted: a conflict.
    pub async fn delete_person(&self, id: Uuid, keep_an_operator: bool) -> Result<()> {
        let mut tx = self.db.begin().await?;
        if keep_an_operator {
            people::ensure_another_operator(&mut tx, id).await?;
        }
        people::delete(&mut *tx, id).await?;
        tx.commit().await?;
        Ok(())
    }

    /// Renames a person and/or changes whether they are an operator, in one transaction (a
    /// store `NotFound` when there is no such person). With `keep_an_operator` the last
    /// operator cannot stop being one: a conflict.
    #[tracing::instrument(skip_all, fields(person.id = %id))]
    pub async fn update_person(
        &self,
        id: Uuid,
        patch: &UserPatch,
        keep_an_operator: bool,
    ) -> Result<PersonRecord> {
        let mut tx = self.db.begin().await?;
        let mut person = people::get(&mut *tx, id).await?;
        if let Some(name) = &patch.name {
            person = people::set_name(&mut *tx, id, name.trim()).await?;
        }
        if let Some(operator) = patch.operator {
            if !operator && keep_an_operator {
                people::ensure_another_operator(&mut tx, id).await?;
            }
            person = people::set_operator(&mut *tx, id, operator).await?;
            tracing::info!(operator, "operator flag changed");
        }
        tx.commit().await?;
        Ok(person)
    }

    /// Changes a person's own display name (trimmed).
    pub async fn rename_person(&self, id: Uuid, name: &str) -> Result<PersonRecord> {
        Ok(people::set_name(&self.db, id, name.trim()).await?)
    }

    /// A person's account and the projects they belong to with their role in each
    /// (`memberships`, as the caller's credential carries them). `settings_url` is left for
    /// the caller, who knows where its pages are.
    pub async fn profile(&self, id: Uuid, memberships: &[(ProjectId, String)]) -> Result<Profile> {
        let person = people::get(&self.db, id).await?;
        let mut listed = Vec::new();
        for (project, role) in memberships {
            let r = projects::get(&self.db, *project).await?;
            listed.push(ProfileProject {
                id: r.id.to_string(),
                slug: r.slug,
                name: r.name,
                role: role.clone(),
            });
        }
        Ok(Profile {
            id: person.id.to_string(),
            email: person.email,
            name: person.name,
            verified: person.verified,
            created_at: Some(person.created_at),
            projects: listed,
            settings_url: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passwords_hash_with_argon2id_and_verify() {
        let h = hash_password("correct horse battery".into()).await.unwrap();
        assert!(h.starts_with("$argon2id$"));
        assert!(verify_password("correct horse battery".into(), h.clone()).await);
        assert!(!verify_password("wrong".into(), h).await);
        assert!(!verify_password("x".into(), "not a hash".into()).await);
    }
}
