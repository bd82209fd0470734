//! What stays on the stand-in from the kube flow: a slowed exec stream, which neither the real
//! API server nor the node shim can be made to produce on demand. The rest of the flow (discovery
//! and the matrix, the scheduled mode, reruns, cut streams, late and missing agents) runs against
//! the real control plane in `prober/tests/cluster/`.

use std::time::{Duration, Instant};

use crate::kit::*;

/// A result stream passed on slowly (a big matrix, a slow coordinator): the session lives past
/// its deadline (here the plan's 1.2 s plus 10 s) while results keep arriving, and every agent's
/// results are kept.
#[test]
fn a_slow_result_stream_that_keeps_flowing_outlives_the_session_deadline() {
    let Some(k) = KubeLab::up("ke2w", "tests/scenarios/healthy.yaml", None) else {
        return;
    };
    k.standin
        .faults(|f| f.exec_slow = Some((48, Duration::from_millis(200))));
    let started = Instant::now();
    let out = matrix_cmd(&k, "60s", None)
        .args(["--timeout", "100ms"])
        .output()
        .unwrap();
    eprintln!("the slowed run took {:?}", started.elapsed());
    no_agent_missing(&out);
    nothing_left(&k);
}
