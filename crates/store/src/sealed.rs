//! Every column that holds a value sealed under the master key, and the pass that moves those
//! values to a new key during a rotation (see the vault crate). The owners of each column know
//! its associated data; this module only walks the rows.

use crate::error::Result;
use crate::Db;
use uuid::Uuid;

/// A sealed column: its table, the id column whose value the associated data is made from,
/// and the column itself.
#[derive(Clone, Copy, Debug)]
pub enum SealedColumn {
    /// `webhooks.secret_sealed`: signing secrets.
    WebhookSecrets,
    /// `secrets.value_sealed`: project secrets.
    SecretValues,
    /// `sessions.sandbox_secrets`: the variables of a sandbox that is up.
    SandboxSecrets,
    /// `git_keys.private_key_sealed`: deploy keys' private halves.
    GitKeys,
    /// `sessions.egress_credentials`: what the egress proxy applies for a sandbox that is up.
    EgressCredentials,
}

/// One stored value of a sealed column.
struct SealedValue {
    id: Uuid,
    sealed: Vec<u8>,
}

impl SealedColumn {
    /// Up to 500 non-null values with an id above `after`, by id. One literal statement per
    /// column, so every one is checked against the schema (a table or column name is never
    /// spliced into SQL).
    async fn page(self, db: &Db, after: Uuid) -> Result<Vec<SealedValue>> {
        Ok(match self {
            SealedColumn::WebhookSecrets => {
                sqlx::query_as!(
                    SealedValue,
                    r#"select id, secret_sealed as "sealed!" from webhooks
                       where secret_sealed is not null and id > $1 order by id limit 500"#,
                    after
                )
                .fetch_all(db)
                .await?
            }
            SealedColumn::SecretValues => {
                sqlx::query_as!(
                    SealedValue,
                    r#"select id, value_sealed as "sealed!" from secrets
                       where value_sealed is not null and id > $1 order by id limit 500"#,
                    after
                )
                .fetch_all(db)
                .await?
            }
            SealedColumn::SandboxSecrets => {
                sqlx::query_as!(
                    SealedValue,
                    r#"select id, sandbox_secrets as "sealed!" from sessions
                       where sandbox_secrets is not null and id > $1 order by id limit 500"#,
                    after
                )
                .fetch_all(db)
                .await?
            }
            SealedColumn::EgressCredentials => {
                sqlx::query_as!(
                    SealedValue,
                    r#"select id, egress_credentials as "sealed!" from sessions
                       where egress_credentials is not null and id > $1 order by id limit 500"#,
                    after
                )
                .fetch_all(db)
                .await?
            }
            SealedColumn::GitKeys => {
                sqlx::query_as!(
                    SealedValue,
                    r#"select id, private_key_sealed as "sealed!" from git_keys
                       where private_key_sealed is not null and id > $1 order by id limit 500"#,
                    after
                )
                .fetch_all(db)
                .await?
            }
        })
    }

    /// Stores `new` for row `id` if its value is still `old`; the rows changed (0 or 1).
    async fn replace(self, db: &Db, id: Uuid, old: &[u8], new: &[u8]) -> Result<u64> {
        let r = match self {
            SealedColumn::WebhookSecrets => {
                sqlx::query!(
                    "update webhooks set secret_sealed = $3 where id = $1 and secret_sealed = $2",
                    id,
                    old,
                    new
                )
                .execute(db)
                .await?
            }
            SealedColumn::SecretValues => {
                sqlx::query!(
                    "update secrets set value_sealed = $3 where id = $1 and value_sealed = $2",
                    id,
                    old,
                    new
                )
                .execute(db)
                .await?
            }
            SealedColumn::SandboxSecrets => {
                sqlx::query!(
                    "update sessions set sandbox_secrets = $3 where id = $1 and sandbox_secrets = $2",
                    id,
                    old,
                    new
                )
                .execute(db)
                .await?
            }
            SealedColumn::EgressCredentials => {
                sqlx::query!(
                    "update sessions set egress_credentials = $3 where id = $1 and egress_credentials = $2",
                    id,
                    old,
                    new
                )
                .execute(db)
                .await?
            }
            SealedColumn::GitKeys => {
                sqlx::query!(
                    "update git_keys set private_key_sealed = $3 where id = $1 and private_key_sealed = $2",
                    id,
                    old,
                    new
                )
                .execute(db)
                .await?
            }
        };
        Ok(r.rows_affected())
    }
}

/// What a pass over one column did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Resealed {
    /// Values moved to the current key.
    pub moved: usize,
    /// Values no configured key opens (left as they are).
    pub unreadable: usize,
}

/// Walks `column` by id and stores what `reseal(id, sealed)` returns: `Ok(Some(new))` replaces
/// the value (only if it did not change meanwhile), `Ok(None)` leaves it, `Err` counts it as
/// unreadable.
pub async fn reseal<F, E>(db: &Db, column: SealedColumn, reseal: F) -> Result<Resealed>
where
    F: Fn(Uuid, &[u8]) -> std::result::Result<Option<Vec<u8>>, E>,
{
    let mut done = Resealed::default();
    let mut after = Uuid::nil();
    loop {
        let page = column.page(db, after).await?;
        let Some(last) = page.last() else {
            return Ok(done);
        };
        after = last.id;
        for SealedValue { id, sealed } in page {
            match reseal(id, &sealed) {
                Ok(Some(new)) => {
                    done.moved += column.replace(db, id, &sealed, &new).await? as usize;
                }
                Ok(None) => {}
                Err(_) => done.unreadable += 1,
            }
        }
    }
}
