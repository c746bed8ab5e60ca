//! Actions and the keymap: built-in defaults plus partial overrides from the config file's
//! `[keys]` table (`action = ["key", ...]`). An invalid entry is reported and skipped, never a
//! panic. Key strings: a character (`q`, `?`, `G`), a name (`enter`, `esc`, `tab`, `backtab`,
//! `up`, `down`, `left`, `right`, `home`, `end`, `pageup`, `pagedown`, `space`, `backspace`,
//! `delete`, `f1`…`f12`), optionally prefixed by `ctrl-` and/or `alt-` (`ctrl-c`).

use std::collections::{BTreeMap, HashMap};
use std::fmt;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

macro_rules! actions {
    ($($variant:ident = $name:literal, $help:literal, [$($key:literal),*];)*) => {
        /// What a key can do. Names are the config file's `[keys]` names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Action { $($variant,)* }

        impl Action {
            pub const ALL: &'static [Action] = &[$(Action::$variant,)*];
            pub fn name(self) -> &'static str { match self { $(Action::$variant => $name,)* } }
            pub fn help(self) -> &'static str { match self { $(Action::$variant => $help,)* } }
            fn default_keys(self) -> &'static [&'static str] { match self { $(Action::$variant => &[$($key),*],)* } }
        }
    };
}

actions! {
    Quit = "quit", "quit gpufleet", ["q", "ctrl-c"];
    Down = "down", "next node (scroll down in the detail pane)", ["j", "down"];
    Up = "up", "previous node (scroll up in the detail pane)", ["k", "up"];
    PageDown = "page-down", "one page down", ["pagedown", "ctrl-d"];
    PageUp = "page-up", "one page up", ["pageup", "ctrl-u"];
    Top = "top", "first node (top of the detail pane)", ["g", "home"];
    Bottom = "bottom", "last node (bottom of the detail pane)", ["G", "end"];
    NextNode = "next-node", "next node, the detail pane staying open", ["n"];
    PrevNode = "prev-node", "previous node, the detail pane staying open", ["p"];
    SortNext = "sort-next", "sort by the next column", ["s", "right"];
    SortPrev = "sort-prev", "sort by the previous column", ["left"];
    SortReverse = "sort-reverse", "reverse the sort order", ["S"];
    Filter = "filter", "filter: text, status:migrate, flavor:proprietary, label:canary, group:a100", ["/"];
    ClearFilter = "clear", "clear the filter / close the pane", ["esc"];
    Detail = "detail", "show or hide the selected node's facts, evidence and raw probe output", ["enter", "d"];
    GroupByLabel = "group-by-label", "group rows by a label (cycles through the label keys)", ["L"];
    Rescan = "rescan", "rescan every node", ["R"];
    RescanSelected = "rescan-selected", "rescan the selected node", ["r"];
    Cancel = "cancel", "cancel the running scan", ["x"];
    ExportJson = "export-json", "export the filtered view as JSON (current folder)", ["e"];
    ExportCsv = "export-csv", "export the filtered view as CSV (current folder)", ["E"];
    Help = "help", "show or hide this help", ["?", "f1"];
    Mark = "mark", "mark or unmark the selected node for an upgrade", ["space"];
    Upgrade = "upgrade", "upgrade the marked nodes (or the selected one): the plan, then type the node count", ["U"];
    ResumeRollout = "resume-rollout", "resume the rollout that did not finish (upgrade --resume): its plan, then type the node count", ["ctrl-r"];
    AbandonRollout = "abandon-rollout", "abandon the rollout that did not finish (upgrade --abandon; its nodes stay as they are): type the node count", ["A"];
    CancelRollout = "cancel-rollout", "stop the running steps of the rollout that did not finish, or of the one running here (upgrade --cancel; its nodes stay drained and locked): type the node count", ["C"];
    RolloutResult = "rollout-result", "show or hide the last rollout's result: each node's outcome, whole", ["o"];
}

impl Action {
    /// Whether the action changes a node (drain, upgrade). Read-only mode leaves every such
    /// action unbound, absent from help, and refuses it if it is reached.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Action::Upgrade
                | Action::Mark
                | Action::ResumeRollout
                | Action::AbandonRollout
                | Action::CancelRollout
        )
    }

    pub fn from_name(name: &str) -> Option<Action> {
        Action::ALL.iter().copied().find(|a| a.name() == name)
    }
}

/// A key with modifiers, as bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Key {
    code: KeyCode,
    ctrl: bool,
    alt: bool,
}

impl Key {
    /// The binding a key event matches: SHIFT is part of the character (`G`, `?`), not a flag.
    pub fn from_event(e: &KeyEvent) -> Key {
        Key {
            code: match e.code {
                KeyCode::Char(c) if e.modifiers.contains(KeyModifiers::CONTROL) => {
                    KeyCode::Char(c.to_ascii_lowercase())
                }
                c => c,
            },
            ctrl: e.modifiers.contains(KeyModifiers::CONTROL),
            alt: e.modifiers.contains(KeyModifiers::ALT),
        }
    }

    /// Parses a key string (module docs).
    pub fn parse(s: &str) -> Result<Key, String> {
        let mut rest = s;
        let (mut ctrl, mut alt) = (false, false);
        loop {
            if let Some(r) = rest.strip_prefix("ctrl-").filter(|r| !r.is_empty()) {
                ctrl = true;
                rest = r;
            } else if let Some(r) = rest.strip_prefix("alt-").filter(|r| !r.is_empty()) {
                alt = true;
                rest = r;
            } else {
                break;
            }
        }
        let mut chars = rest.chars();
        let code = match (chars.next(), chars.next()) {
            (Some(c), None) => KeyCode::Char(if ctrl { c.to_ascii_lowercase() } else { c }),
            _ => match rest.to_ascii_lowercase().as_str() {
                "enter" => KeyCode::Enter,
                "esc" | "escape" => KeyCode::Esc,
                "tab" => KeyCode::Tab,
                "backtab" => KeyCode::BackTab,
                "up" => KeyCode::Up,
                "down" => KeyCode::Down,
                "left" => KeyCode::Left,
                "right" => KeyCode::Right,
                "home" => KeyCode::Home,
                "end" => KeyCode::End,
                "pageup" | "pgup" => KeyCode::PageUp,
                "pagedown" | "pgdn" => KeyCode::PageDown,
                "space" => KeyCode::Char(' '),
                "backspace" => KeyCode::Backspace,
                "delete" | "del" => KeyCode::Delete,
                f if f.starts_with('f')
                    && f[1..].parse::<u8>().is_ok_and(|n| (1..=12).contains(&n)) =>
                {
                    KeyCode::F(f[1..].parse().unwrap_or(1))
                }
                _ => {
                    return Err(format!(
                        "`{s}` is not a key (try q, ctrl-c, enter, esc, up, f1, ...)"
                    ));
                }
            },
        };
        Ok(Key { code, ctrl, alt })
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.ctrl {
            f.write_str("ctrl-")?;
        }
        if self.alt {
            f.write_str("alt-")?;
        }
        match self.code {
            KeyCode::Char(' ') => f.write_str("space"),
            KeyCode::Char(c) => write!(f, "{c}"),
            KeyCode::Enter => f.write_str("enter"),
            KeyCode::Esc => f.write_str("esc"),
            KeyCode::Tab => f.write_str("tab"),
            KeyCode::BackTab => f.write_str("backtab"),
            KeyCode::Up => f.write_str("up"),
            KeyCode::Down => f.write_str("down"),
            KeyCode::Left => f.write_str("left"),
            KeyCode::Right => f.write_str("right"),
            KeyCode::Home => f.write_str("home"),
            KeyCode::End => f.write_str("end"),
            KeyCode::PageUp => f.write_str("pageup"),
            KeyCode::PageDown => f.write_str("pagedown"),
            KeyCode::Backspace => f.write_str("backspace"),
            KeyCode::Delete => f.write_str("delete"),
            KeyCode::F(n) => write!(f, "f{n}"),
            other => write!(f, "{other:?}"),
        }
    }
}

/// Key → action, with the keys of each action in order (for the help overlay).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keymap {
    bindings: HashMap<Key, Action>,
    by_action: BTreeMap<Action, Vec<Key>>,
    /// Read-only mode: the keys write actions would have had (unbound, so pressing one can say
    /// why nothing happens).
    withheld: HashMap<Key, Action>,
}

impl Keymap {
    /// The built-in keymap with `overrides` (`[keys]` of the config: action name → key strings)
    /// applied: a listed action gets exactly the listed keys, which are taken from any action
    /// that had them. In read-only mode write actions are left unbound. Returns the keymap and
    /// one message per invalid entry.
    pub fn new(
        overrides: &BTreeMap<String, Vec<String>>,
        read_only: bool,
    ) -> (Keymap, Vec<String>) {
        let mut problems = Vec::new();
        let mut by_action: BTreeMap<Action, Vec<Key>> = Action::ALL
            .iter()
            .map(|a| {
                let keys = a
                    .default_keys()
                    .iter()
                    .filter_map(|k| Key::parse(k).ok())
                    .collect();
                (*a, keys)
            })
            .collect();
        for (name, keys) in overrides {
            let Some(action) = Action::from_name(name) else {
                let hint = crate::diag::closest(name, Action::ALL.iter().map(|a| a.name()))
                    .map(|s| format!("; did you mean `{s}`?"))
                    .unwrap_or_default();
                problems.push(format!("[keys] `{name}` is not an action{hint}"));
                continue;
            };
            let mut parsed = Vec::new();
            for k in keys {
                match Key::parse(k) {
                    Ok(key) => parsed.push(key),
                    Err(e) => problems.push(format!("[keys] {name}: {e}")),
                }
            }
            for other in by_action.values_mut() {
                other.retain(|k| !parsed.contains(k));
            }
            by_action.insert(action, parsed);
        }
        let mut withheld = HashMap::new();
        if read_only {
            for (a, keys) in &by_action {
                if a.is_write() {
                    withheld.extend(keys.iter().map(|k| (*k, *a)));
                }
            }
            by_action.retain(|a, _| !a.is_write());
        }
        let mut bindings = HashMap::new();
        for (a, keys) in &by_action {
            for k in keys {
                bindings.insert(*k, *a);
            }
        }
        (
            Keymap {
                bindings,
                by_action,
                withheld,
            },
            problems,
        )
    }

    pub fn action(&self, e: &KeyEvent) -> Option<Action> {
        self.bindings.get(&Key::from_event(e)).copied()
    }

    /// The write action `e` would run outside read-only mode (None when it is bound, or no
    /// write action's key).
    pub fn withheld(&self, e: &KeyEvent) -> Option<Action> {
        self.withheld.get(&Key::from_event(e)).copied()
    }

    /// The keys bound to `a`, as text (`j, down`).
    pub fn keys_of(&self, a: Action) -> String {
        self.by_action
            .get(&a)
            .map(|ks| ks.iter().map(Key::to_string).collect::<Vec<_>>().join(", "))
            .unwrap_or_default()
    }

    /// Bound actions in help order.
    pub fn bound(&self) -> impl Iterator<Item = Action> + '_ {
        Action::ALL
            .iter()
            .copied()
            .filter(|a| self.by_action.get(a).is_some_and(|k| !k.is_empty()))
    }
}

/// One line of `gpufleet keys`: an action's `[keys]` name, its keys (`j, down`; empty when
/// unbound), whether it changes nodes, and what it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyLine {
    pub action: &'static str,
    pub keys: String,
    pub write: bool,
    pub help: &'static str,
}

impl Keymap {
    /// Every action, in help order, with its keys in this keymap (for `gpufleet keys`).
    pub fn listing(&self) -> Vec<KeyLine> {
        Action::ALL
            .iter()
            .map(|a| KeyLine {
                action: a.name(),
                keys: self.keys_of(*a),
                write: a.is_write(),
                help: a.help(),
            })
            .collect()
    }
}

impl Default for Keymap {
    fn default() -> Self {
        Keymap::new(&BTreeMap::new(), false).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(code: KeyCode, m: KeyModifiers) -> KeyEvent {
        KeyEvent::new(code, m)
    }

    #[test]
    fn defaults_and_shifted_characters() {
        let k = Keymap::default();
        assert_eq!(
            k.action(&ev(KeyCode::Char('q'), KeyModifiers::NONE)),
            Some(Action::Quit)
        );
        assert_eq!(
            k.action(&ev(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(
            k.action(&ev(KeyCode::Char('G'), KeyModifiers::SHIFT)),
            Some(Action::Bottom)
        );
        assert_eq!(
            k.action(&ev(KeyCode::Char('?'), KeyModifiers::SHIFT)),
            Some(Action::Help)
        );
        assert_eq!(k.keys_of(Action::Down), "j, down");
    }

    #[test]
    fn partial_overrides_and_invalid_entries() {
        let mut o = BTreeMap::new();
        o.insert("quit".to_string(), vec!["ctrl-q".to_string()]);
        o.insert(
            "down".to_string(),
            vec!["n".to_string(), "ctrl-".to_string(), "hyper-x".to_string()],
        );
        o.insert("qiut".to_string(), vec!["z".to_string()]);
        let (k, problems) = Keymap::new(&o, false);
        assert_eq!(
            k.action(&ev(KeyCode::Char('q'), KeyModifiers::CONTROL)),
            Some(Action::Quit)
        );
        assert_eq!(k.action(&ev(KeyCode::Char('q'), KeyModifiers::NONE)), None);
        assert_eq!(
            k.action(&ev(KeyCode::Char('n'), KeyModifiers::NONE)),
            Some(Action::Down)
        );
        assert_eq!(
            k.action(&ev(KeyCode::Up, KeyModifiers::NONE)),
            Some(Action::Up)
        );
        assert_eq!(problems.len(), 3, "{problems:?}");
        assert!(problems.iter().any(|p| p.contains("did you mean `quit`?")));
    }

    #[test]
    fn key_strings_round_trip() {
        for s in [
            "q", "ctrl-c", "alt-x", "enter", "esc", "f5", "pagedown", "G", "?", "space",
        ] {
            assert_eq!(Key::parse(s).unwrap().to_string(), s);
        }
        assert!(Key::parse("f13").is_err());
        assert!(Key::parse("").is_err());
    }
}
