//! Work-completion statuses (`enum ibv_wc_status`) and what each says
//! about a rail: the evidence table of docs/STATE-MACHINE.md ("Transfer
//! outcomes").
//!
//! A failed completion is evidence against the **local path** (this NIC,
//! its port, its link: the transport gave up), against the **peer or the
//! application** (the remote side refused, or the request was malformed:
//! nothing about this rail), or a **consequence** of an earlier error (a
//! QP in error flushes what was queued: counting it would count one
//! failure many times). Codes this build does not know are reported but
//! never acted on.

use std::fmt;

/// What one completion status says about the rail it completed on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WcClass {
    /// `IBV_WC_SUCCESS`: the path carried it.
    Success = 0,
    /// Evidence against the local path (retry exceeded, local QP operation
    /// error, response timeout, fatal).
    LocalPath,
    /// Evidence against the peer or the application (remote access,
    /// remote invalid request, RNR retry exceeded, local protection or
    /// length errors of the request itself).
    PeerOrApp,
    /// A consequence of an earlier error (`IBV_WC_WR_FLUSH_ERR`): never
    /// counted as evidence.
    Consequence,
    /// A code this build does not know: counted, never acted on.
    Unknown,
}

impl WcClass {
    /// snake_case name, as in JSON and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            WcClass::Success => "success",
            WcClass::LocalPath => "local_path",
            WcClass::PeerOrApp => "peer_or_app",
            WcClass::Consequence => "consequence",
            WcClass::Unknown => "unknown",
        }
    }
}

impl fmt::Display for WcClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One row of the table: the code, its `IBV_WC_*` name (lower case, as in
/// JSON), its class and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WcStatus {
    /// The raw `ibv_wc_status` value.
    pub code: u32,
    /// `"retry_exc_err"` for `IBV_WC_RETRY_EXC_ERR`.
    pub name: &'static str,
    /// What it says about the rail.
    pub class: WcClass,
    /// Why, in one line.
    pub why: &'static str,
}

const fn row(code: u32, name: &'static str, class: WcClass, why: &'static str) -> WcStatus {
    WcStatus { code, name, class, why }
}

use WcClass::{Consequence, LocalPath, PeerOrApp, Success};

/// Every status rdma-core 44+ defines, in code order (`WC_STATUSES[c].code
/// == c`).
pub const WC_STATUSES: [WcStatus; 24] = [
    row(0, "success", Success, "the transfer completed"),
    row(1, "loc_len_err", PeerOrApp, "the posted length exceeds what the QP allows: the request's fault"),
    row(
        2,
        "loc_qp_op_err",
        LocalPath,
        "the local QP could not execute the request (rxe: no route once the link is down)",
    ),
    row(3, "loc_eec_op_err", LocalPath, "the local end-to-end context failed (RD)"),
    row(4, "loc_prot_err", PeerOrApp, "a local protection error: the request used a key or PD it may not"),
    row(5, "wr_flush_err", Consequence, "flushed because the QP was already in error: a consequence, never counted"),
    row(6, "mw_bind_err", PeerOrApp, "a memory-window bind the application asked for failed"),
    row(7, "bad_resp_err", PeerOrApp, "the responder sent an unexpected transport response"),
    row(8, "loc_access_err", PeerOrApp, "a local access violation by the request (its buffers)"),
    row(9, "rem_inv_req_err", PeerOrApp, "the responder found the request invalid"),
    row(10, "rem_access_err", PeerOrApp, "the responder refused access (rkey, bounds)"),
    row(11, "rem_op_err", PeerOrApp, "the responder could not complete the operation"),
    row(12, "retry_exc_err", LocalPath, "the transport retried until retry_cnt and no ack came: the path is broken"),
    row(13, "rnr_retry_exc_err", PeerOrApp, "the receiver had no receive posted: the peer application is slow"),
    row(14, "loc_rdd_viol_err", PeerOrApp, "an RD domain violation by the request"),
    row(15, "rem_inv_rd_req_err", PeerOrApp, "the responder found an RD request invalid"),
    row(16, "rem_abort_err", PeerOrApp, "the responder aborted the operation"),
    row(17, "inv_eecn_err", LocalPath, "an invalid end-to-end context number (RD): the local context"),
    row(18, "inv_eec_state_err", LocalPath, "the local end-to-end context is in a bad state (RD)"),
    row(19, "fatal_err", LocalPath, "the local device reported a fatal error"),
    row(20, "resp_timeout_err", LocalPath, "no response came in time: the path is broken"),
    row(21, "general_err", LocalPath, "the device failed the request without a more precise status"),
    row(22, "tm_err", PeerOrApp, "a tag-matching error in the application's use of the SRQ"),
    row(23, "tm_rndv_incomplete", PeerOrApp, "a tag-matching rendezvous the peer did not finish"),
];

/// The row for `code`, if this build knows it.
pub fn wc_status(code: u32) -> Option<&'static WcStatus> {
    WC_STATUSES.get(code as usize)
}

/// Each status's class, by code (a small table: the report path looks it
/// up once per line).
const CLASSES: [WcClass; WC_STATUSES.len()] = {
    let mut classes = [WcClass::Unknown; WC_STATUSES.len()];
    let mut i = 0;
    while i < WC_STATUSES.len() {
        classes[i] = WC_STATUSES[i].class;
        i += 1;
    }
    classes
};

/// What completion status `code` says about the rail.
#[inline]
pub fn classify_wc(code: u32) -> WcClass {
    match CLASSES.get(code as usize) {
        Some(&class) => class,
        None => WcClass::Unknown,
    }
}

/// The status's name (`"retry_exc_err"`), or `None` for an unknown code.
pub fn wc_name(code: u32) -> Option<&'static str> {
    wc_status(code).map(|s| s.name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_indexed_by_code() {
        for (i, s) in WC_STATUSES.iter().enumerate() {
            assert_eq!(s.code as usize, i, "{}", s.name);
        }
        assert_eq!(classify_wc(24), WcClass::Unknown);
        assert_eq!(classify_wc(u32::MAX), WcClass::Unknown);
    }

    #[test]
    fn only_code_0_is_a_success() {
        // The report path's fast case tests the code, not the class.
        let successes: Vec<u32> = WC_STATUSES.iter().filter(|s| s.class == WcClass::Success).map(|s| s.code).collect();
        assert_eq!(successes, [0]);
    }

    #[test]
    fn what_rxe_reports_on_a_pull_is_local_and_a_flush_is_never_counted() {
        // KERNEL.md: a pulled cable fails live QPs with RETRY_EXC_ERR (12);
        // an admin down fails the next send with LOC_QP_OP_ERR (2).
        assert_eq!(classify_wc(12), WcClass::LocalPath);
        assert_eq!(classify_wc(2), WcClass::LocalPath);
        assert_eq!(classify_wc(5), WcClass::Consequence);
        // A peer's refusals say nothing about this rail.
        for code in [9, 10, 13] {
            assert_eq!(classify_wc(code), WcClass::PeerOrApp, "{code}");
        }
    }
}
