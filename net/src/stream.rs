//! Streams apart from HTTP (`decisions.md` §12): a client's messages parsed and refused
//! (`ops`), and one connection's state turned into the frames it is sent (`session`). The
//! front's `stream_api` does the upgrade and the socket; nothing here knows of either.

pub mod ops;
pub mod session;
pub mod watch;
