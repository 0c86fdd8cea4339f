//! The one error of talking to a node (a driver over stdio, or a service
//! over HTTP inside its network namespace).

use std::time::Duration;

/// Why a request to a node did not get an answer.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    #[error("the node did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the node stopped ({0})")]
    Died(String),
    #[error("cannot talk to the node: {0}")]
    Io(String),
}
