//! The call record: what a rank publishes when it arrives at a collective, and the bits
//! of its words.

/// The bits of a call record's flag word (word 6): `recv_writable`, whether `send` and
/// `recv` lie in the publisher's shared heap, and above them the id of the exposure the
/// call uses (0 for none).
pub(super) const FLAG_WRITABLE: u64 = 1;
pub(super) const FLAG_SEND_HEAP: u64 = 2;
pub(super) const FLAG_RECV_HEAP: u64 = 4;
pub(super) const EXPOSURE_SHIFT: u32 = 8;
/// A bit of [`Call::op`] (above what `coll` packs there): the call shares no buffer with
/// its peers, only lengths (see the module docs). A rank's verdict on it must depend only
/// on the published calls, and its data must move only through the segment.
pub(crate) const PRIVATE: u64 = 1 << 63;
/// Words in a call record.
pub(super) const WORDS: usize = 10;
pub(super) const STATUS: usize = WORDS - 1;

/// What a rank publishes when it arrives at a collective.
///
/// `op` is chosen by `coll` (collective, algorithm and parameters packed in one word);
/// `sync` only transports it, like `aux` and `aux2`. `send`/`recv` are addresses in the
/// publishing process, with their lengths in bytes: `send` may be read by peers during
/// the round; `recv` may be written by peers only if `recv_writable` is set, which a rank
/// does only when its algorithm lets peers write into it (the address then comes from a
/// unique borrow).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Call {
    pub(crate) op: u64,
    pub(crate) root: i64,
    pub(crate) send: usize,
    pub(crate) send_len: usize,
    pub(crate) recv: usize,
    pub(crate) recv_len: usize,
    pub(crate) recv_writable: bool,
    pub(crate) aux: u64,
    pub(crate) aux2: u64,
}

impl Call {
    pub(super) fn words(&self) -> [u64; WORDS - 1] {
        [
            self.op,
            self.root as u64,
            self.send as u64,
            self.send_len as u64,
            self.recv as u64,
            self.recv_len as u64,
            self.recv_writable as u64,
            self.aux,
            self.aux2,
        ]
    }

    pub(super) fn from_words(w: [u64; WORDS - 1]) -> Call {
        Call {
            op: w[0],
            root: w[1] as i64,
            send: w[2] as usize,
            send_len: w[3] as usize,
            recv: w[4] as usize,
            recv_len: w[5] as usize,
            recv_writable: w[6] & FLAG_WRITABLE != 0,
            aux: w[7],
            aux2: w[8],
        }
    }
}
