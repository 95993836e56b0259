//! Why the packet stream's sender or receiver could not be set up.

use std::net::SocketAddr;

/// Why the stream's sender or receiver could not be set up, as said to the user (the flag whose value the
/// system refused, the end whose socket failed). Clone: a failure of one end is told to the other too.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    /// A flag's value the system refused: `--tx-netns NS`, `--rx-dev DEV`, `--bind ADDR`, `--dst-mac MAC`.
    #[error("{flag} {value}: {cause}")]
    Flag {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What the system said.
        cause: String,
    },
    /// An end's socket could not be opened or set up.
    #[error("{end} socket: {cause}")]
    Socket {
        /// `sender` or `receiver`.
        end: &'static str,
        /// What the system said.
        cause: String,
    },
    /// The sender could not connect to where it sends.
    #[error("sender: connect to {target}: {cause}")]
    Connect {
        /// Where it sends.
        target: SocketAddr,
        /// What the system said (and how to route a group).
        cause: String,
    },
    /// An end stopped before it handed the other what it waits for: (the end, what it had not done).
    #[error("the {0} ended before it {1}")]
    Ended(&'static str, &'static str),
    /// The receiver failed to set up, and the sender stopped for it.
    #[error("the receiver could not start")]
    ReceiverFailed,
    /// An end's thread panicked.
    #[error("the {0} thread panicked")]
    Panicked(&'static str),
    /// A stream of frames was asked to go to a UDP address.
    #[error("a MAC address for a UDP stream")]
    MacForUdp,
    /// The watched stream's receiver thread could not start (what the system said).
    #[error("starting the packet receiver: {0}")]
    ReceiverThread(String),
    /// The watched stream's receiver thread ended before it was set up.
    #[error("the packet receiver ended before it was set up")]
    ReceiverEnded,
}

impl StreamError {
    /// A refused flag value.
    pub(super) fn flag(
        flag: &'static str,
        value: impl ToString,
        cause: impl ToString,
    ) -> StreamError {
        StreamError::Flag {
            flag,
            value: value.to_string(),
            cause: cause.to_string(),
        }
    }

    /// An error of `end`'s socket, for `map_err`.
    pub(super) fn socket(end: &'static str) -> impl Fn(std::io::Error) -> StreamError {
        move |e| StreamError::Socket {
            end,
            cause: e.to_string(),
        }
    }
}
