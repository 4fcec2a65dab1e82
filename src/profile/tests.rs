//! Unit tests of loading: parsing, defaults, located errors, suggestions.

use super::*;

fn host() -> HostFacts {
    HostFacts::with_cores(4)
}

fn load(text: &str) -> Result<Profile, ProfileError> {
    load_str(text, Path::new("p/test.yaml"), &host())
}

fn err(text: &str) -> String {
    load(text).unwrap_err().to_string()
}

#[test]
fn an_almost_empty_profile_gets_every_default() {
    let p = load("description: defaults\n").unwrap();
    let d = Profile::default();
    assert_eq!(p.name, "test");
    assert_eq!(p.scenarios, d.scenarios);
    assert_eq!(p.server, d.server);
    assert_eq!(p.loader, d.loader);
    assert_eq!(p.thresholds, d.thresholds);
    assert_eq!(p.load.threads, 1, "threads follow loader cpus");
}

#[test]
fn parses_the_suggested_shape() {
    let p = load(
        "frameworks: {exclude: [nginx]}\nscenarios: [plaintext, middleware-3]\n\
         concurrency: [100, 1000]\nwarmup: {mode: until-stable, window: 2s, max_cv: 0.1, max_duration: 30s}\n\
         duration: 1m30s\nload: {mode: fixed-rate, rate: 20000, pipeline: 2}\n\
         server: {cpus: 2, cpuset: 0-1, memory: 512MiB}\nloader: {cpus: 2, cpuset: '2-3', memory: 1GiB}\n",
    )
    .unwrap();
    assert_eq!(p.frameworks, Frameworks::Exclude(vec!["nginx".into()]));
    assert_eq!(p.scenarios[1], crate::contract::Scenario::Middleware(3));
    assert_eq!(p.duration, std::time::Duration::from_secs(90));
    assert_eq!(p.load.mode, LoadMode::FixedRate { rate: 20000 });
    assert_eq!(p.load.threads, 2);
    assert_eq!(p.server.memory, 512 << 20);
    assert!(matches!(p.warmup, Warmup::UntilStable { max_cv, .. } if max_cv == 0.1));
}

#[test]
fn short_warmup_means_fixed() {
    let p = load("warmup: 2s\n").unwrap();
    assert_eq!(
        p.warmup,
        Warmup::Fixed {
            duration: std::time::Duration::from_secs(2)
        }
    );
}

#[test]
fn shown_profile_loads_back_to_the_same_profile() {
    let p = load(
        "scenarios: [json, echo]\nconcurrency: [10, 20]\nframeworks: [a, b]\n\
                  load: {mode: fixed-rate, rate: 100}\nwarmup: {mode: until-stable}\n",
    )
    .unwrap();
    let yaml = serde_saphyr::to_string(&p).unwrap();
    let back = load(&yaml).unwrap_or_else(|e| panic!("{e}\n{yaml}"));
    assert_eq!(back, p, "{yaml}");
}

#[test]
fn unknown_field_names_line_column_and_suggestion() {
    let e = err("rounds: 3\nconcurency: [100]\n");
    assert!(
        e.starts_with("p/test.yaml:2:1: `concurency`: unknown field `concurency`"),
        "{e}"
    );
    assert!(e.ends_with("(did you mean `concurrency`?)"), "{e}");
}

#[test]
fn nested_unknown_field_has_its_full_path() {
    let e = err("server:\n  cpus: 1\n  nofiles: 70000\n");
    assert!(
        e.starts_with("p/test.yaml:3:3: `server.nofiles`: unknown field"),
        "{e}"
    );
    assert!(e.contains("did you mean `nofile`?"), "{e}");
}

#[test]
fn bad_duration_points_at_the_value() {
    let e = err("duration: -5s\n");
    assert!(e.starts_with("p/test.yaml:1:11: `duration`:"), "{e}");
    assert!(e.contains("negative"), "{e}");
}

#[test]
fn wrong_type_says_what_was_expected() {
    let e = err("rounds: many\n");
    assert!(e.starts_with("p/test.yaml:1:9: `rounds`:"), "{e}");
}

#[test]
fn rounds_until_precise_take_their_defaults_and_say_what_is_wrong() {
    assert_eq!(load("rounds: 5\n").unwrap().rounds, Rounds::Fixed(5));
    assert_eq!(
        load("rounds: {precision: 0.05}\n").unwrap().rounds,
        Rounds::UntilPrecise {
            min: 3,
            max: 12,
            precision: 0.05
        }
    );
    assert_eq!(
        load("rounds:\n  min: 4\n  max: 6\n").unwrap().rounds,
        Rounds::UntilPrecise {
            min: 4,
            max: 6,
            precision: 0.02
        }
    );
    let e = err("rounds:\n  min: 2\n");
    assert!(e.starts_with("p/test.yaml:2:8: `rounds.min`:"), "{e}");
    assert!(e.contains("at least 3"), "{e}");
    let e = err("rounds:\n  min: 5\n  max: 4\n");
    assert!(e.starts_with("p/test.yaml:3:8: `rounds.max`:"), "{e}");
    let e = err("rounds:\n  precision: 2\n");
    assert!(
        e.contains("`rounds.precision`") && e.contains("0.02 for ±2%"),
        "{e}"
    );
    let e = err("rounds:\n  mx: 4\n");
    assert!(e.contains("mx"), "{e}");
    assert!(err("rounds: 0\n").contains("at least 1"));
}

#[test]
fn a_budget_needs_rounds_until_precise_and_interleaved_frameworks() {
    let ok = "rounds: {precision: 0.02}\ninterleave_rounds: true\nbudget: 18m\n";
    let p = load(ok).unwrap();
    assert_eq!(p.budget, Some(std::time::Duration::from_secs(18 * 60)));
    assert_eq!(
        load(&ok.replace("18m", "1h")).unwrap(),
        Profile {
            budget: Some(std::time::Duration::from_secs(3600)),
            ..p.clone()
        }
    );
    assert_eq!(load("rounds: 3\n").unwrap().budget, None);
    let e = err("rounds: 5\ninterleave_rounds: true\nbudget: 10m\n");
    assert!(e.starts_with("p/test.yaml:3:9: `budget`:"), "{e}");
    assert!(e.contains("rounds: {min, max, precision}"), "{e}");
    let e = err("rounds: {precision: 0.02}\nbudget: 10m\n");
    assert!(e.starts_with("p/test.yaml:2:9: `budget`:"), "{e}");
    assert!(e.contains("interleave_rounds: true"), "{e}");
    let e = err("rounds: {precision: 0.02}\ninterleave_rounds: true\nbudget: 0s\n");
    assert!(e.contains("longer than zero"), "{e}");
}

#[test]
fn unknown_scenario_suggests_the_nearest() {
    let e = err("scenarios: [plaintext, jsn]\n");
    assert!(
        e.starts_with("p/test.yaml:1:24: `scenarios[1]`: unknown scenario `jsn`"),
        "{e}"
    );
    assert!(e.contains("did you mean `json`?"), "{e}");
    let e = err("scenarios: [middleware_3]\n");
    assert!(e.contains("did you mean `middleware-3`?"), "{e}");
}

#[test]
fn unknown_enum_value_suggests_the_nearest() {
    let e = err("network: hots\n");
    assert!(
        e.starts_with("p/test.yaml:1:10: `network`: unknown value `hots`"),
        "{e}"
    );
    assert!(e.contains("did you mean `host`?"), "{e}");
}

#[test]
fn syntax_error_is_reported_with_position() {
    let e = err("concurrency: [100, 200\nrounds: 3\n");
    assert!(e.starts_with("p/test.yaml:"), "{e}");
    assert!(e.contains("YAML syntax error"), "{e}");
}

#[test]
fn semantic_errors_point_at_the_offending_item() {
    let e = err("concurrency: [100, 0]\n");
    assert_eq!(
        e,
        "p/test.yaml:1:20: `concurrency[1]`: must be at least 1 connection"
    );
    let e = err("scenarios: [json, json]\n");
    assert!(
        e.starts_with("p/test.yaml:1:19: `scenarios[1]`: scenario `json` is listed twice"),
        "{e}"
    );
}

#[test]
fn nofile_must_cover_the_highest_concurrency() {
    let e = err("concurrency: [100, 10000]\nserver: {nofile: 4096}\n");
    assert!(
        e.starts_with("p/test.yaml:2:18: `server.nofile`: 4096 is below"),
        "{e}"
    );
    assert!(e.contains("at least 10256"), "{e}");
}

#[test]
fn cpus_beyond_the_host_are_refused() {
    let e = err("server: {cpus: 8}\n");
    assert!(
        e.contains("`server.cpus`: 8 is more than this host's 4 online core(s) (0-3)"),
        "{e}"
    );
}

#[test]
fn fractional_cpus_are_a_share_of_whole_pinned_cores() {
    let p = load("loader: {cpus: 0.25}\nserver: {cpus: 1.5}\n").unwrap();
    assert_eq!((p.loader.cpus, p.loader.cores()), (0.25, 1));
    assert_eq!((p.server.cpus, p.server.cores()), (1.5, 2));
    let placed = p.placement(&host()).unwrap();
    assert_eq!((placed.server.0.len(), placed.loader.0.len()), (2, 1));
    let e = err("loader: {cpus: 0}\n");
    assert!(e.contains("`loader.cpus`: must be at least 0.01"), "{e}");
}

#[test]
fn overlapping_cpusets_need_permission() {
    let text = "server: {cpuset: '0-1'}\nloader: {cpuset: '1'}\n";
    let e = err(text);
    assert!(
        e.starts_with("p/test.yaml:2:18: `loader.cpuset`: shares core(s) 1"),
        "{e}"
    );
    assert!(load(&format!("{text}allow_shared_cores: true\n")).is_ok());
}

#[test]
fn auto_cores_that_do_not_fit_are_refused() {
    let e = load_str(
        "server: {cpus: 2}\n",
        Path::new("x.yaml"),
        &HostFacts::with_cores(2),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("`server.cpus`: the loader needs 1 core(s)"),
        "{e}"
    );
}

#[test]
fn fixed_rate_needs_a_rate() {
    let e = err("load:\n  mode: fixed-rate\n");
    assert!(
        e.starts_with("p/test.yaml:2:9: `load.mode`: `fixed-rate` needs a target rate"),
        "{e}"
    );
}

#[test]
fn host_network_refuses_sysctls_and_defaults_to_none() {
    let p = load("network: host\n").unwrap();
    assert!(p.server.sysctls.is_empty() && p.loader.sysctls.is_empty());
    let e = err("network: host\nserver:\n  sysctls: {net.core.somaxconn: 1024}\n");
    assert!(
        e.starts_with("p/test.yaml:3:12: `server.sysctls`: cannot be set with `network: host`"),
        "{e}"
    );
}

#[test]
fn unknown_sysctl_is_refused_with_suggestion() {
    let e = err("server:\n  sysctls:\n    net.core.somaxcon: 1024\n");
    assert!(
        e.starts_with(r#"p/test.yaml:3:5: `server.sysctls["net.core.somaxcon"]`: unknown sysctl"#),
        "{e}"
    );
    assert!(e.contains("did you mean `net.core.somaxconn`?"), "{e}");
}

#[test]
fn narrow_port_range_is_refused() {
    let e = err("concurrency: [5000]\nloader:\n  sysctls: {net.ipv4.ip_local_port_range: \"60000 61000\"}\n");
    assert!(
        e.contains("has 1001 ports, fewer than the highest concurrency (5000)"),
        "{e}"
    );
    let e = err(
        "concurrency: [30000]\nserver: {nofile: 40000}\nloader: {nofile: 40000, sysctls: {}}\n",
    );
    assert!(e.contains("the kernel default: 32768 60999"), "{e}");
}

#[test]
fn thresholds_must_be_fractions() {
    let e = err("thresholds:\n  max_cv: 5\n");
    assert!(
        e.starts_with("p/test.yaml:2:11: `thresholds.max_cv`: 5 is out of range"),
        "{e}"
    );
}

#[test]
fn memory_below_the_floor_is_refused() {
    let e = err("loader: {memory: 16MiB}\n");
    assert!(
        e.contains("`loader.memory`: 16MiB is below the floor of 32MiB"),
        "{e}"
    );
}

#[test]
fn empty_file_is_an_error() {
    assert!(err("# nothing\n").contains("the file is empty"));
}

#[test]
fn suggestions_only_for_near_misses() {
    let names = ["concurrency", "scenarios", "rounds"];
    assert_eq!(suggest("concurency", names), Some("concurrency"));
    assert_eq!(suggest("Rounds", names), Some("rounds"));
    assert_eq!(suggest("xyz", names), None);
}

#[test]
fn schema_is_valid_json_schema_naming_every_field() {
    let schema: serde_json::Value = serde_json::from_str(&schema_json()).unwrap();
    assert!(jsonschema::meta::is_valid(&schema));
    let props = schema["properties"].as_object().unwrap();
    for f in [
        "frameworks",
        "scenarios",
        "concurrency",
        "warmup",
        "load",
        "server",
        "thresholds",
    ] {
        assert!(props.contains_key(f), "{f}");
    }
}

#[test]
fn detects_at_least_one_online_core() {
    let h = HostFacts::detect();
    assert!(!h.cores_online.0.is_empty());
    if let Some((lo, hi)) = h.ip_local_port_range {
        assert!(lo <= hi);
    }
}

#[test]
fn paths_are_taken_as_paths_and_bare_names_looked_up() {
    assert_eq!(locate("a/b.yaml").unwrap(), PathBuf::from("a/b.yaml"));
    assert_eq!(locate("x.yml").unwrap(), PathBuf::from("x.yml"));
    let missing = locate("no-such-profile-anywhere").unwrap_err().to_string();
    assert!(
        missing.starts_with("no profile named `no-such-profile-anywhere`"),
        "{missing}"
    );
}

#[test]
fn the_profile_name_is_the_file_stem() {
    let p = load_str("rounds: 1\n", Path::new("profiles/highconc.yaml"), &host()).unwrap();
    assert_eq!(p.name, "highconc");
}

#[test]
fn a_threshold_that_switches_its_gate_off_must_say_so() {
    let e = err("thresholds:\n  max_error_rate: 1.0\n");
    assert!(
        e.starts_with("p/test.yaml:2:19: `thresholds.max_error_rate`: 1 switches the gate off"),
        "{e}"
    );
    assert!(e.contains("thresholds.off: [max_error_rate]"), "{e}");
    let e = err("thresholds:\n  littles_law_tolerance: 1\n");
    assert!(
        e.contains("`thresholds.littles_law_tolerance`: 1 switches the gate off"),
        "{e}"
    );
    // Said explicitly: accepted, and recorded so the report can say it.
    let p = load("thresholds:\n  max_error_rate: 1.0\n  off: [max_error_rate]\n").unwrap();
    assert!(p.thresholds.off.max_error_rate);
    assert_eq!(p.thresholds.off.names(), ["max_error_rate"]);
    let e = err("thresholds:\n  off: [max_errors]\n");
    assert!(
        e.contains("`thresholds.off[0]`: `max_errors` is not a gate"),
        "{e}"
    );
}

#[test]
fn a_fixed_rate_too_low_for_every_connection_to_be_served_is_refused() {
    // 100 connections at 20 req/s: each sends once every 5 s, in a 10 s
    // window that is two turns, the least allowed; 15 req/s is too few.
    assert!(
        load("duration: 10s\nconcurrency: [100]\nload: {mode: fixed-rate, rate: 20}\n").is_ok()
    );
    let e = err("duration: 10s\nconcurrency: [100]\nload: {mode: fixed-rate, rate: 15}\n");
    assert!(
        e.contains(
            "`load.rate`: at 15 req/s over 100 connections each connection sends once every 6.67 s"
        ),
        "{e}"
    );
    assert!(e.contains("raise the rate to at least 20 req/s"), "{e}");
}

#[test]
fn every_shipped_profile_reads_back_from_the_json_a_run_records() {
    // results.json keeps the resolved profile as JSON and `compare` reads
    // it back through `Profile`: nothing may change on the way.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/profiles");
    let mut seen = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let host = HostFacts {
            frameworks: None,
            ..HostFacts::with_cores(8)
        };
        let p = load_str(&text, &path, &host).unwrap_or_else(|e| panic!("{e}"));
        let json = serde_json::to_string(&p).unwrap();
        let mut back: Profile = serde_json::from_str(&json)
            .unwrap_or_else(|e| panic!("{}: {e}\n{json}", path.display()));
        back.name.clone_from(&p.name);
        assert_eq!(back, p, "{}: {json}", path.display());
        seen += 1;
    }
    assert!(seen >= 4, "only {seen} profiles under {dir}");
}

#[test]
fn websocket_scenarios_load_and_refuse_http2_naming_the_protocol() {
    let p = load("scenarios: [ws-echo-64, plaintext]\nprotocol: [http1, https]\n").unwrap();
    assert_eq!(p.scenarios[0], crate::contract::Scenario::WsEcho(64));
    let e = err("scenarios: [ws-echo-64]\nprotocol: [http1, h2c]\n");
    assert!(
        e.contains("protocol[1]") && e.contains("`h2c` cannot carry `ws-echo-64`"),
        "{e}"
    );
    let e = err("scenarios: [ws-echo-0]\n");
    assert!(e.contains("message size"), "{e}");
    let e = err("scenarios: [ws-echo]\n");
    assert!(e.contains("ws-echo"), "{e}");
}

#[test]
fn grpc_scenarios_load_over_http2_and_refuse_http1_naming_the_protocol() {
    let p = load("scenarios: [grpc-unary]\nprotocol: [h2c, h2]\n").unwrap();
    assert_eq!(p.scenarios[0], crate::contract::Scenario::GrpcUnary);
    let e = err("scenarios: [grpc-unary]\nprotocol: [h2c, https]\n");
    assert!(
        e.contains("protocol[1]")
            && e.contains("`https` cannot carry `grpc-unary`")
            && e.contains("gRPC runs over HTTP/2"),
        "{e}"
    );
    // With no protocol given the profile speaks http1, which gRPC is not.
    let e = err("scenarios: [grpc-unary]\n");
    assert!(e.contains("`http1` cannot carry `grpc-unary`"), "{e}");
}
