//! Themes: semantic roles (ok, warn, blocked, crit, status-unknown, no-driver, unknown, info,
//! dim, header, title, border, selected, badge, gauge, probing) mapped to styles, from
//! `themes/*.toml` (built in: default, light, high-contrast) or `<config dir>/themes/NAME.toml`.
//! A user theme overrides only the roles it names. With `NO_COLOR` set (no-color.org) colours
//! are dropped and the selection is shown reversed.
//!
//! Roles by status: ready `ok`, migrate `warn`, blocked `blocked`, attention and unreachable
//! `crit`, unknown `status-unknown`, no-driver `no-driver`. The role `unknown` is for unknown
//! values (`?`). Themes written before `no-driver` existed styled no-driver nodes with
//! `unknown`: a theme file that sets `unknown` but not `no-driver` still does.

use std::collections::BTreeMap;
use std::path::Path;
use std::str::FromStr;

use ratatui::style::{Color, Modifier, Style};
use serde::Deserialize;

use crate::model::NodeStatus;

const BUILT_IN: [(&str, &str); 3] = [
    ("default", include_str!("../../themes/default.toml")),
    ("light", include_str!("../../themes/light.toml")),
    (
        "high-contrast",
        include_str!("../../themes/high-contrast.toml"),
    ),
];

const ROLES: [&str; 16] = [
    "ok",
    "warn",
    "blocked",
    "crit",
    "status-unknown",
    "no-driver",
    "unknown",
    "info",
    "dim",
    "header",
    "title",
    "border",
    "selected",
    "badge",
    "gauge",
    "probing",
];

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RoleSpec {
    fg: Option<String>,
    bg: Option<String>,
    #[serde(default)]
    bold: bool,
    #[serde(default)]
    dim: bool,
    #[serde(default)]
    italic: bool,
    #[serde(default)]
    underlined: bool,
    #[serde(default)]
    reversed: bool,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct ThemeFile {
    #[allow(dead_code)]
    name: Option<String>,
    #[serde(default)]
    roles: BTreeMap<String, RoleSpec>,
}

/// Resolved styles by role.
#[derive(Debug, Clone, PartialEq)]
pub struct Theme {
    pub name: String,
    roles: BTreeMap<&'static str, Style>,
}

fn style_of(spec: &RoleSpec) -> Result<Style, String> {
    let color = |s: &str| Color::from_str(s).map_err(|_| format!("`{s}` is not a colour"));
    let mut st = Style::default();
    if let Some(fg) = &spec.fg {
        st = st.fg(color(fg)?);
    }
    if let Some(bg) = &spec.bg {
        st = st.bg(color(bg)?);
    }
    for (on, m) in [
        (spec.bold, Modifier::BOLD),
        (spec.dim, Modifier::DIM),
        (spec.italic, Modifier::ITALIC),
        (spec.underlined, Modifier::UNDERLINED),
        (spec.reversed, Modifier::REVERSED),
    ] {
        if on {
            st = st.add_modifier(m);
        }
    }
    Ok(st)
}

impl Theme {
    fn parse_onto(mut self, text: &str, origin: &str) -> Result<Theme, String> {
        let file: ThemeFile =
            toml::from_str(text).map_err(|e| crate::diag::toml_error(origin, text, &e))?;
        for (role, spec) in &file.roles {
            let Some(key) = ROLES.iter().find(|r| **r == role) else {
                let hint = crate::diag::closest(role, ROLES)
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                return Err(format!("{origin}: unknown role `{role}`{hint}"));
            };
            self.roles.insert(
                key,
                style_of(spec).map_err(|e| format!("{origin}: {role}: {e}"))?,
            );
        }
        // `no-driver` was split from `unknown`: a theme that styles only `unknown` keeps
        // styling no-driver nodes with it.
        if file.roles.contains_key("unknown")
            && !file.roles.contains_key("no-driver")
            && let Some(st) = self.roles.get("unknown").copied()
        {
            self.roles.insert("no-driver", st);
        }
        Ok(self)
    }

    #[allow(
        clippy::expect_used,
        reason = "themes/default.toml is compiled in and parsed by a unit test"
    )]
    fn base() -> Theme {
        Theme {
            name: "default".into(),
            roles: BTreeMap::new(),
        }
        .parse_onto(BUILT_IN[0].1, "themes/default.toml")
        .expect("the built-in default theme parses")
    }

    /// Loads theme `name`: `<config_dir>/themes/NAME.toml` if it exists, else a built-in one.
    /// Errors name the file and what is wrong; `no_color` drops every colour.
    pub fn load(name: &str, config_dir: Option<&Path>, no_color: bool) -> Result<Theme, String> {
        let user = config_dir.map(|d| d.join("themes").join(format!("{name}.toml")));
        let mut theme = match user.filter(|p| p.exists()) {
            Some(p) => {
                let text =
                    std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()))?;
                Theme::base().parse_onto(&text, &p.display().to_string())?
            }
            None => {
                let (_, text) = BUILT_IN.iter().find(|(n, _)| *n == name).ok_or_else(|| {
                    let names: Vec<&str> = BUILT_IN.iter().map(|(n, _)| *n).collect();
                    format!("no theme `{name}` (built in: {}; or put {name}.toml in the config folder's themes/)", names.join(", "))
                })?;
                Theme::base().parse_onto(text, &format!("themes/{name}.toml"))?
            }
        };
        theme.name = name.to_string();
        if no_color {
            for (role, st) in theme.roles.iter_mut() {
                let mut plain = Style::default().add_modifier(st.add_modifier);
                if *role == "selected" || *role == "badge" {
                    plain = plain.add_modifier(Modifier::REVERSED);
                }
                *st = plain;
            }
        }
        Ok(theme)
    }

    /// The style of `role` (one of the role names above).
    pub fn role(&self, role: &str) -> Style {
        self.roles.get(role).copied().unwrap_or_default()
    }

    /// The role a status is drawn with.
    pub fn status(&self, s: NodeStatus) -> Style {
        self.role(match s {
            NodeStatus::Ready => "ok",
            NodeStatus::Migrate => "warn",
            NodeStatus::Blocked => "blocked",
            NodeStatus::Attention | NodeStatus::Unreachable => "crit",
            NodeStatus::NoDriver => "no-driver",
            NodeStatus::Unknown => "status-unknown",
        })
    }
}

impl Default for Theme {
    fn default() -> Self {
        Theme::base()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn built_in_themes_define_every_role() {
        for (name, text) in BUILT_IN {
            let file: ThemeFile = toml::from_str(text).unwrap();
            for r in ROLES {
                assert!(file.roles.contains_key(r), "{name} lacks {r}");
            }
            Theme::load(name, None, false).unwrap();
        }
    }

    #[test]
    fn user_theme_overrides_roles_and_errors_are_clear() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        std::fs::write(
            dir.path().join("themes/mine.toml"),
            "[roles]\nok = { fg = \"#00ff00\" }\n",
        )
        .unwrap();
        let t = Theme::load("mine", Some(dir.path()), false).unwrap();
        assert_eq!(t.role("ok").fg, Some(Color::Rgb(0, 255, 0)));
        assert_eq!(t.role("crit"), Theme::default().role("crit"));
        std::fs::write(
            dir.path().join("themes/bad.toml"),
            "[roles]\nwran = { fg = \"red\" }\n",
        )
        .unwrap();
        let e = Theme::load("bad", Some(dir.path()), false).unwrap_err();
        assert!(
            e.contains("unknown role `wran`; did you mean `warn`?"),
            "{e}"
        );
        std::fs::write(
            dir.path().join("themes/bad2.toml"),
            "[roles]\nok = { fg = \"reddish\" }\n",
        )
        .unwrap();
        assert!(
            Theme::load("bad2", Some(dir.path()), false)
                .unwrap_err()
                .contains("not a colour")
        );
        assert!(
            Theme::load("nope", None, false)
                .unwrap_err()
                .contains("built in: default, light, high-contrast")
        );
    }

    #[test]
    fn statuses_have_their_own_roles_and_unknown_stands_apart() {
        for (name, _) in BUILT_IN {
            let t = Theme::load(name, None, false).unwrap();
            // The split kept the colours: no-driver nodes look as they did.
            assert_eq!(t.role("no-driver"), t.role("unknown"), "{name}");
            assert_eq!(
                t.status(NodeStatus::NoDriver),
                t.role("no-driver"),
                "{name}"
            );
            let unknown = t.status(NodeStatus::Unknown);
            assert_eq!(unknown, t.role("status-unknown"), "{name}");
            for s in NodeStatus::ALL {
                if s != NodeStatus::Unknown {
                    assert_ne!(unknown, t.status(s), "{name}: unknown looks like {s}");
                }
            }
            // Not even its colour may be ready's.
            assert_ne!(unknown.fg, t.status(NodeStatus::Ready).fg, "{name}");
        }
    }

    #[test]
    fn a_theme_that_styles_only_unknown_still_styles_no_driver_nodes() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("themes")).unwrap();
        let write = |name: &str, text: &str| {
            std::fs::write(dir.path().join(format!("themes/{name}.toml")), text).unwrap()
        };
        write(
            "old",
            "[roles]\nunknown = { fg = \"#123456\", italic = true }\n",
        );
        let t = Theme::load("old", Some(dir.path()), false).unwrap();
        let mine = Style::default()
            .fg(Color::Rgb(0x12, 0x34, 0x56))
            .add_modifier(Modifier::ITALIC);
        assert_eq!(t.role("unknown"), mine);
        assert_eq!(t.status(NodeStatus::NoDriver), mine);
        // The new status keeps the default theme's style.
        assert_eq!(
            t.status(NodeStatus::Unknown),
            Theme::default().role("status-unknown")
        );
        // A theme that names both keeps each.
        write(
            "new",
            "[roles]\nunknown = { fg = \"#123456\" }\nno-driver = { fg = \"blue\" }\n",
        );
        let t = Theme::load("new", Some(dir.path()), false).unwrap();
        assert_eq!(t.status(NodeStatus::NoDriver).fg, Some(Color::Blue));
        assert_eq!(t.role("unknown").fg, Some(Color::Rgb(0x12, 0x34, 0x56)));
        // A theme that names neither keeps the default's.
        write("other", "[roles]\nok = { fg = \"green\" }\n");
        let t = Theme::load("other", Some(dir.path()), false).unwrap();
        assert_eq!(
            t.status(NodeStatus::NoDriver),
            Theme::default().role("no-driver")
        );
        write("typo", "[roles]\nstatus-unknwn = { fg = \"red\" }\n");
        let e = Theme::load("typo", Some(dir.path()), false).unwrap_err();
        assert!(e.contains("did you mean `status-unknown`?"), "{e}");
    }

    #[test]
    fn no_color_keeps_only_modifiers() {
        let t = Theme::load("default", None, true).unwrap();
        for r in ROLES {
            assert_eq!(t.role(r).fg, None, "{r}");
            assert_eq!(t.role(r).bg, None, "{r}");
        }
        assert!(t.role("selected").add_modifier.contains(Modifier::REVERSED));
    }
}
