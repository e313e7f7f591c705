//! One skill report: `GET /v1/skills/{name}` answers byte for byte what
//! `skillstore show --json NAME` prints, for every example skill.

use std::path::PathBuf;

use crate::common::*;
use skillstore::Config;
use skillstore_server::Scope;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_show_route_is_byte_for_byte_show_json_for_every_example_skill() {
    let repo = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf();
    let file = repo.join("skillstore.yaml");
    let config = Config::load(&file).unwrap();
    let served = Served::start(settings(vec![("acme", config.clone(), vec![("tok", Scope::Read)])])).await;
    let catalog = config.open().unwrap().load().await;
    let names: Vec<String> = catalog.skills().iter().map(|s| s.name().to_owned()).collect();
    assert!(names.len() >= 5, "{names:?}");
    let client = reqwest::Client::new();
    for name in &names {
        let answered = get(&client, served.url(&format!("/v1/skills/{name}")), "tok").await;
        assert_eq!(answered.status(), 200, "{name}");
        let body = answered.text().await.unwrap();
        let shown = std::process::Command::new(skillstore_binary())
            .args(["--config", file.to_str().unwrap(), "show", "--json", name])
            .current_dir(&repo)
            .output()
            .unwrap();
        assert!(shown.status.success(), "{}", String::from_utf8_lossy(&shown.stderr));
        assert_eq!(body, String::from_utf8(shown.stdout).unwrap(), "{name}");
        assert!(body.contains("\"version\""), "{name}: {body}");
    }
    served.stop().await;
}
