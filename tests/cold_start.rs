//! Known answers for cold start: the plainfw fixture sleeping a known time
//! before it binds its port (`PLAINFW_START_DELAY_MS`), through the real
//! `fairground run` (its prober started before the server, in the network
//! namespace the server joins; see src/docker/prestart.rs).
//!
//! `fast` starts in a millisecond or two; `sleep300` and `sleep700` sleep
//! 300 and 700 ms first. Two rounds with a restart between them, so each
//! framework is cold-started twice. A cold start spans Docker's
//! `State.StartedAt` to the prober's first whole 200, so the true figure of
//! a sleeping variant is its sleep plus what `fast` measures (exec, bind,
//! first answer), give or take how late Docker stamps `StartedAt`.
//! Tolerance, stated per figure: the prober polls every 1 ms (resolution),
//! `StartedAt` trails the process's exec by a few ms at most, and the
//! server's own start varies by a few ms on a busy 2-core host (page
//! faults, scheduling): `sleep D` must read within D − 10 ms and
//! D + 10 ms + the slowest `fast` start. None may be an upper bound.
//!
//! Only traffic: containers on the run's own internal network.

mod docker_support;

use docker_support::*;
use fairground::results::Reason;

#[test]
fn cold_start_is_the_known_start_up_time_to_the_millisecond() {
    if !docker_or_skip("cold_start") {
        return;
    }
    let tmp = tempfile::tempdir().unwrap().keep();
    let variants: [(&str, Option<u64>); 3] = [
        ("fast", None),
        ("sleep300", Some(300)),
        ("sleep700", Some(700)),
    ];
    for (name, delay) in variants {
        let ms = delay.map(|d| d.to_string());
        let env: Vec<(&str, &str)> = ms
            .as_deref()
            .map(|d| vec![("PLAINFW_START_DELAY_MS", d)])
            .unwrap_or_default();
        plainfw_variant(&tmp, name, &env);
    }
    let profile = "description: \"cold start known answers\"\n\
         frameworks: [fast, sleep300, sleep700]\nscenarios: [plaintext]\nconcurrency: [4]\n\
         warmup: 1s\nduration: 1s\nrounds: 2\nrestart_between_rounds: true\n\
         load: {threads: 1, timeout: 2s}\n\
         server: {cpus: 1, memory: 128MiB, nofile: 4096}\n\
         loader: {cpus: 1, memory: 128MiB, nofile: 4096}\n\
         idle_settle: 100ms\nreadiness_timeout: 30s\n\
         thresholds: {preflight: warn, off: [slowed_machine]}\n";
    // Two starts per framework is the known answer, and one more for each
    // round measured again on a busy host (a slowed machine would add
    // more; that rule is off here: tests/precision_docker.rs and the run's
    // own tests cover it).
    let (r, stderr) = run_profile_in(&tmp, profile);
    let cold = |name: &str| -> Vec<f64> {
        let f = r
            .framework(name)
            .unwrap_or_else(|| panic!("{name} ran: {stderr}"));
        eprintln!(
            "cold start {name}: {:?} ms ({} upper bounds)",
            f.cold_start_ms, f.cold_start_upper_bounds
        );
        assert_eq!(f.cold_start_upper_bounds, 0, "{name}: no `≤` figure");
        // One start per round: the two planned, and one more for each of
        // them measured again because the host was busy during it (a
        // repeat is not repeated).
        let cell = r
            .cells
            .iter()
            .find(|c| c.key.framework == name)
            .unwrap_or_else(|| panic!("{name} has a cell: {stderr}"));
        let again = cell
            .verdict
            .reasons
            .iter()
            .filter(|x| matches!(x, Reason::HostBusy { round, .. } if *round < 2))
            .count();
        assert_eq!(cell.rounds.len(), 2 + again, "{name}: {:?}", cell.verdict);
        assert_eq!(
            f.cold_start_ms.len(),
            cell.rounds.len(),
            "{name}: started once per round"
        );
        f.cold_start_ms.clone()
    };
    let fast = cold("fast");
    let slowest_fast = fast.iter().copied().fold(0.0, f64::max);
    assert!(
        slowest_fast < 100.0,
        "a static binary binding at once starts in well under 100 ms: {fast:?}"
    );
    for (name, delay) in [("sleep300", 300.0), ("sleep700", 700.0)] {
        for c in cold(name) {
            assert!(
                c >= delay - 10.0 && c <= delay + 10.0 + slowest_fast,
                "{name}: cold start {c} ms, expected {delay} ms (−10, +10 + {slowest_fast})"
            );
        }
    }
}
