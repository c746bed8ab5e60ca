//! Themes: semantic roles (ok, warn, blocked, crit, status-unknown, no-driver, unknown, info,
//! dim, header, title, border, selected, badge, gauge, probing, changed) mapped to styles, from
//! `themes/*.toml` (built in: default, light, high-contrast) or `<config dir>/themes/NAME.toml`.
//! A user theme overrides only the roles it names. With `NO_COLOR` set (no-color.org) colours
//! are dropped and the selection is shown reversed.
//!
//! Roles by status: ready `ok`, migrate `warn`, blocked `blocked`, attention and unreachable
//! `crit`, unknown `status-unknown`, no-driver `no-driver`. The role `unknown` is for unknown
//! values (`?`). Themes written before `no-driver` existed styled no-driver nodes with
//! `unknown`: a theme file that sets `unknown` but not `no-driver` still does.

use std::collections::BTreeMap;
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

/// A semantic role of the theme: what a style is for. Theme files name roles in kebab case
/// (`status-unknown`); code names them with this enum, so a typo does not compile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    Ok,
    Warn,
    Blocked,
    Crit,
    StatusUnknown,
    NoDriver,
    Unknown,
    Info,
    Dim,
    Header,
    Title,
    Border,
    Selected,
    Badge,
    Gauge,
    Probing,
    /// A cell that differs from the `--compare` snapshot.
    Changed,
}

impl Role {
    /// Every role, in the order themes list them.
    pub const ALL: [Role; 17] = [
        Role::Ok,
        Role::Warn,
        Role::Blocked,
        Role::Crit,
        Role::StatusUnknown,
        Role::NoDriver,
        Role::Unknown,
        Role::Info,
        Role::Dim,
        Role::Header,
        Role::Title,
        Role::Border,
        Role::Selected,
        Role::Badge,
        Role::Gauge,
        Role::Probing,
        Role::Changed,
    ];

    /// The role's name in theme files.
    pub fn name(self) -> &'static str {
        match self {
            Role::Ok => "ok",
            Role::Warn => "warn",
            Role::Blocked => "blocked",
            Role::Crit => "crit",
            Role::StatusUnknown => "status-unknown",
            Role::NoDriver => "no-driver",
            Role::Unknown => "unknown",
            Role::Info => "info",
            Role::Dim => "dim",
            Role::Header => "header",
            Role::Title => "title",
            Role::Border => "border",
            Role::Selected => "selected",
            Role::Badge => "badge",
            Role::Gauge => "gauge",
            Role::Probing => "probing",
            Role::Changed => "changed",
        }
    }
}

/// The role names theme files may use.
const ROLES: [&str; 17] = [
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
    "changed",
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
    roles: BTreeMap<Role, Style>,
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
            let Some(key) = Role::ALL.into_iter().find(|r| r.name() == role) else {
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
            && let Some(st) = self.roles.get(&Role::Unknown).copied()
        {
            self.roles.insert(Role::NoDriver, st);
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

    /// Theme `name` (pure: the caller reads the file). `user` is the text of the user's theme
    /// file `<config dir>/themes/NAME.toml` and its path for messages, when that file exists;
    /// otherwise `name` must be built in. Errors name the file and what is wrong; `no_color`
    /// drops every colour.
    pub fn resolve(
        name: &str,
        user: Option<(&str, &str)>,
        no_color: bool,
    ) -> Result<Theme, String> {
        let mut theme = match user {
            Some((text, origin)) => Theme::base().parse_onto(text, origin)?,
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
                if *role == Role::Selected || *role == Role::Badge {
                    plain = plain.add_modifier(Modifier::REVERSED);
                }
                *st = plain;
            }
        }
        Ok(theme)
    }

    /// The style of `role` (the built-in default theme defines every role; a unit test checks).
    pub fn role(&self, role: Role) -> Style {
        self.roles.get(&role).copied().unwrap_or_default()
    }

    /// The style of a cell of this tone ([`crate::view::Tone`]): how the matrix and the
    /// detail pane colour a value, never by its text.
    pub fn tone(&self, tone: crate::view::Tone) -> Style {
        use crate::view::Tone;
        match tone {
            Tone::Status(s) => self.status(s),
            Tone::Crit => self.role(Role::Crit),
            Tone::Warn => self.role(Role::Warn),
            Tone::Dim => self.role(Role::Dim),
            Tone::Unknown => self.role(Role::Unknown),
            Tone::Plain => Style::default(),
        }
    }

    /// The role a status is drawn with.
    pub fn status(&self, s: NodeStatus) -> Style {
        self.role(match s {
            NodeStatus::Ready => Role::Ok,
            NodeStatus::Migrate => Role::Warn,
            NodeStatus::Blocked => Role::Blocked,
            NodeStatus::Attention | NodeStatus::Unreachable => Role::Crit,
            NodeStatus::NoDriver => Role::NoDriver,
            NodeStatus::Unknown => Role::StatusUnknown,
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

    /// Reads `<dir>/themes/NAME.toml` as the settings do, then resolves it.
    fn load(name: &str, dir: Option<&std::path::Path>, no_color: bool) -> Result<Theme, String> {
        let path = dir.map(|d| d.join("themes").join(format!("{name}.toml")));
        match path.filter(|p| p.exists()) {
            Some(p) => {
                let text = std::fs::read_to_string(&p).unwrap();
                Theme::resolve(name, Some((&text, &p.display().to_string())), no_color)
            }
            None => Theme::resolve(name, None, no_color),
        }
    }

    #[test]
    fn built_in_themes_define_every_role() {
        for (name, text) in BUILT_IN {
            let file: ThemeFile = toml::from_str(text).unwrap();
            for r in ROLES {
                assert!(file.roles.contains_key(r), "{name} lacks {r}");
            }
            load(name, None, false).unwrap();
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
        let t = load("mine", Some(dir.path()), false).unwrap();
        assert_eq!(t.role(Role::Ok).fg, Some(Color::Rgb(0, 255, 0)));
        assert_eq!(t.role(Role::Crit), Theme::default().role(Role::Crit));
        std::fs::write(
            dir.path().join("themes/bad.toml"),
            "[roles]\nwran = { fg = \"red\" }\n",
        )
        .unwrap();
        let e = load("bad", Some(dir.path()), false).unwrap_err();
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
            load("bad2", Some(dir.path()), false)
                .unwrap_err()
                .contains("not a colour")
        );
        assert!(
            load("nope", None, false)
                .unwrap_err()
                .contains("built in: default, light, high-contrast")
        );
    }

    #[test]
    fn statuses_have_their_own_roles_and_unknown_stands_apart() {
        for (name, _) in BUILT_IN {
            let t = load(name, None, false).unwrap();
            // The split kept the colours: no-driver nodes look as they did.
            assert_eq!(t.role(Role::NoDriver), t.role(Role::Unknown), "{name}");
            assert_eq!(
                t.status(NodeStatus::NoDriver),
                t.role(Role::NoDriver),
                "{name}"
            );
            let unknown = t.status(NodeStatus::Unknown);
            assert_eq!(unknown, t.role(Role::StatusUnknown), "{name}");
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
        let t = load("old", Some(dir.path()), false).unwrap();
        let mine = Style::default()
            .fg(Color::Rgb(0x12, 0x34, 0x56))
            .add_modifier(Modifier::ITALIC);
        assert_eq!(t.role(Role::Unknown), mine);
        assert_eq!(t.status(NodeStatus::NoDriver), mine);
        // The new status keeps the default theme's style.
        assert_eq!(
            t.status(NodeStatus::Unknown),
            Theme::default().role(Role::StatusUnknown)
        );
        // A theme that names both keeps each.
        write(
            "new",
            "[roles]\nunknown = { fg = \"#123456\" }\nno-driver = { fg = \"blue\" }\n",
        );
        let t = load("new", Some(dir.path()), false).unwrap();
        assert_eq!(t.status(NodeStatus::NoDriver).fg, Some(Color::Blue));
        assert_eq!(t.role(Role::Unknown).fg, Some(Color::Rgb(0x12, 0x34, 0x56)));
        // A theme that names neither keeps the default's.
        write("other", "[roles]\nok = { fg = \"green\" }\n");
        let t = load("other", Some(dir.path()), false).unwrap();
        assert_eq!(
            t.status(NodeStatus::NoDriver),
            Theme::default().role(Role::NoDriver)
        );
        write("typo", "[roles]\nstatus-unknwn = { fg = \"red\" }\n");
        let e = load("typo", Some(dir.path()), false).unwrap_err();
        assert!(e.contains("did you mean `status-unknown`?"), "{e}");
    }

    #[test]
    fn no_color_keeps_only_modifiers() {
        let t = load("default", None, true).unwrap();
        for r in Role::ALL {
            assert_eq!(t.role(r).fg, None, "{r:?}");
            assert_eq!(t.role(r).bg, None, "{r:?}");
        }
        assert!(
            t.role(Role::Selected)
                .add_modifier
                .contains(Modifier::REVERSED)
        );
    }
}
