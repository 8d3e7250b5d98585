//! Projects. Until the tenancy issue lands, every request acts in the `default` project that
//! the first migration creates.

use sandbox_agents_domain::ProjectId;
use uuid::Uuid;

/// The id the first migration gives the `default` project.
pub const DEFAULT_PROJECT: ProjectId =
    ProjectId(Uuid::from_u128(0x00000000_0000_7000_8000_000000000001));
