//! The caller, as the auth layer established it: open mode, the shared token, an API key or
//! a signed-in person. Handlers take it as an extractor (see `auth`).

use sandbox_agents_domain::agent_version::ChangedBy;
use sandbox_agents_domain::ProjectId;
use uuid::Uuid;

/// The caller.
#[derive(Clone, Debug, PartialEq)]
pub enum Principal {
    /// Open mode: nothing is configured, every caller acts as an operator.
    Open,
    /// The deployment's shared token: an operator.
    Token,
    /// An API key, bound to one project or (made by an operator) to none.
    ApiKey {
        id: Uuid,
        name: String,
        project: Option<ProjectId>,
    },
    /// A person signed in to the web UI (a session cookie), with their memberships.
    Person {
        id: Uuid,
        email: String,
        operator: bool,
        projects: Vec<(ProjectId, String)>,
    },
    /// No credential, or one that is not accepted (only public routes let it through).
    Anonymous { reason: &'static str },
}

impl Principal {
    /// Operators manage keys, projects and people: the shared token, operator people, and
    /// anyone in open mode.
    pub fn is_operator(&self) -> bool {
        matches!(
            self,
            Principal::Open | Principal::Token | Principal::Person { operator: true, .. }
        )
    }

    /// A person's role in `project`, if they have one.
    pub fn role_in(&self, project: ProjectId) -> Option<&str> {
        match self {
            Principal::Person { projects, .. } => projects
                .iter()
                .find(|(p, _)| *p == project)
                .map(|(_, r)| r.as_str()),
            _ => None,
        }
    }

    /// `Me.kind`: `token`, `api_key` or `user`; none in open mode or without a credential.
    pub fn kind(&self) -> Option<&'static str> {
        match self {
            Principal::Token => Some("token"),
            Principal::ApiKey { .. } => Some("api_key"),
            Principal::Person { .. } => Some("user"),
            Principal::Open | Principal::Anonymous { .. } => None,
        }
    }

    /// Who made an agent version, as recorded with it; None without a credential.
    pub fn changed_by(&self) -> Option<ChangedBy> {
        let (kind, id, name) = match self {
            Principal::Open => ("open", None, None),
            Principal::Token => ("token", None, None),
            Principal::ApiKey { id, name, .. } => {
                ("api_key", Some(id.to_string()), Some(name.clone()))
            }
            Principal::Person { id, email, .. } => {
                ("user", Some(id.to_string()), Some(email.clone()))
            }
            Principal::Anonymous { .. } => return None,
        };
        Some(ChangedBy {
            kind: kind.into(),
            id,
            name,
        })
    }

    /// Who made something, as recorded on it (`created_by`).
    pub fn subject(&self) -> Option<String> {
        match self {
            Principal::Token => Some("token".into()),
            Principal::ApiKey { id, .. } | Principal::Person { id, .. } => Some(id.to_string()),
            Principal::Open => Some("open".into()),
            Principal::Anonymous { .. } => None,
        }
    }
}
