//! Answers that arrive in waves (issue 36, item 7): a server that answers
//! every connection once per period P at C connections reads C/P req/s
//! within 2%, whatever the window's length and where its edges fall among
//! the waves, and the report says the answers came in bursts; a steady
//! server gets no such note.

mod load_support;

use std::time::Duration;

use load_support::burst_server::BurstServer;
use load_support::{load, ok_response, Action, ScriptedServer};

/// Connections of the burst server: one answer each per tick.
const C: u64 = 60;
/// Its period.
const P: Duration = Duration::from_millis(200);

/// Windows of 1.1, 1.5 and 2.3 s (5.5, 7.5 and 11.5 periods: a plain count
/// is off by up to half a wave, ±9% at 1.1 s) behind warm-ups that put the
/// window's edges at different phases of the waves.
#[test]
fn waves_read_c_over_p_whatever_the_window_length_and_phase() {
    let server = BurstServer::start(P);
    let expected = C as f64 / P.as_secs_f64();
    let c = C.to_string();
    for (duration, warmup) in [
        ("1100ms", "250ms"),
        ("1500ms", "330ms"),
        ("2300ms", "410ms"),
    ] {
        let r = load(&[
            "--url",
            &server.url(),
            "-c",
            &c,
            "-t",
            "1",
            "--warmup",
            warmup,
            "-d",
            duration,
            "--timeout",
            "1s",
        ]);
        let plain = r.responses.status_2xx as f64 / r.measured_s;
        let b = r.bursts.unwrap_or_else(|| {
            panic!(
                "window {duration}: no bursts reported ({plain:.0} req/s counted): {:?}",
                r.windows
            )
        });
        assert!(
            (r.throughput_rps / expected - 1.0).abs() < 0.02,
            "window {duration}: {:.1} req/s, expected {expected:.0} (counted over the window: {plain:.1}): {b:?}",
            r.throughput_rps
        );
        assert_eq!(r.throughput_rps, b.rate_rps);
        assert!(
            (b.period_s / P.as_secs_f64() - 1.0).abs() < 0.02,
            "window {duration}: {b:?}"
        );
        assert!(
            (b.per_burst / C as f64 - 1.0).abs() < 0.03,
            "window {duration}: {b:?}"
        );
        assert!(
            b.describe().starts_with("answers came in bursts of about "),
            "{}",
            b.describe()
        );
        let mut human = Vec::new();
        r.write_human(&mut human).unwrap();
        let human = String::from_utf8(human).unwrap();
        assert!(human.contains("answers came in bursts"), "{human}");
    }
}

#[test]
fn a_steady_server_gets_no_burst_note() {
    let server = ScriptedServer::start(|_| Action::Reply(ok_response()));
    let r = load(&["--url", &server.url(), "-c", "8", "-t", "1", "-d", "1500ms"]);
    assert!(r.responses.status_2xx > 1_000, "{:?}", r.responses);
    assert_eq!(r.bursts, None, "{:?}", r.windows);
    let plain = r.responses.status_2xx as f64 / r.measured_s;
    assert!((r.throughput_rps - plain).abs() < 1e-9 * plain);
}
