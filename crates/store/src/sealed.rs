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
}

impl SealedColumn {
    fn parts(self) -> (&'static str, &'static str, &'static str) {
        match self {
            SealedColumn::WebhookSecrets => ("webhooks", "id", "secret_sealed"),
            SealedColumn::SecretValues => ("secrets", "id", "value_sealed"),
            SealedColumn::SandboxSecrets => ("sessions", "id", "sandbox_secrets"),
            SealedColumn::GitKeys => ("git_keys", "id", "private_key_sealed"),
        }
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
    let (table, id_col, col) = column.parts();
    let mut done = Resealed::default();
    let mut after = Uuid::nil();
    loop {
        let page: Vec<(Uuid, Vec<u8>)> = sqlx::query_as(&format!(
            "select {id_col}, {col} from {table}
             where {col} is not null and {id_col} > $1 order by {id_col} limit 500"
        ))
        .bind(after)
        .fetch_all(db)
        .await?;
        let Some((last, _)) = page.last() else {
            return Ok(done);
        };
        after = *last;
        for (id, sealed) in page {
            match reseal(id, &sealed) {
                Ok(Some(new)) => {
                    let r = sqlx::query(&format!(
                        "update {table} set {col} = $3 where {id_col} = $1 and {col} = $2"
                    ))
                    .bind(id)
                    .bind(&sealed)
                    .bind(&new)
                    .execute(db)
                    .await?;
                    done.moved += r.rows_affected() as usize;
                }
                Ok(None) => {}
                Err(_) => done.unreadable += 1,
            }
        }
    }
}
