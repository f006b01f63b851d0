//! The limits and policies of one cache handle: how long a writer waits for the lock, and
//! how retrieval ranks neighbours. Explicit configuration instead of constants in loops.

use std::time::Duration;

/// Limits and policies of one cache handle.
#[derive(Clone, Debug)]
pub struct CacheConfig {
    /// How long a writer waits for another process's write lock before failing.
    pub busy_timeout: Duration,
    /// How retrieval ranks neighbours.
    pub ranking: RankingConfig,
    /// Never write: no migration, no WAL switch; every write is [`crate::CacheError::ReadOnly`].
    /// On a server the session itself is read-only (`default_transaction_read_only`).
    pub read_only: bool,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            busy_timeout: Duration::from_secs(60),
            ranking: RankingConfig::default(),
            read_only: false,
        }
    }
}

/// How neighbours are ranked (see [`crate::retrieve`]).
#[derive(Clone, Debug, PartialEq)]
pub struct RankingConfig {
    /// `lambda`: weight of the averaged normalised rank against feature distance.
    pub rank_weight: f64,
    /// The nearest neighbour tasks used per tier.
    pub max_neighbours: usize,
    /// Neighbour tasks read per tier to find the nearest (bounds lookups in huge groups).
    pub max_scanned: usize,
}

impl Default for RankingConfig {
    fn default() -> Self {
        RankingConfig {
            rank_weight: 1.0,
            max_neighbours: 16,
            max_scanned: 1024,
        }
    }
}
