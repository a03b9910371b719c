//! Test hosts in network namespaces: a switch (a namespace holding one bridge) and hosts, each a
//! namespace of its own joined to the bridge by a veth pair, with an address that exists only
//! inside these namespaces (`10.99.0.0/24`; every test process has its own switch, so two
//! processes never see each other's hosts). Links between two hosts are cut with blackhole
//! routes on both sides (each drops what it sends to the other: silence, as a dead link gives,
//! not a refusal), and a host is taken off the switch by setting its port down.
//!
//! Needs root and iproute2's `ip` (`.ci/run` installs iproute2 when missing). The namespaces are
//! named `rpf<pid>-<host>`; those of a test process that has ended are removed by the next one,
//! and [`Net`]'s drop removes its own.

use std::net::Ipv4Addr;
use std::process::Command;

/// The bridge's namespace and the hosts on it.
pub struct Net {
    prefix: String,
    hosts: Vec<String>,
}

/// A host: its namespace's name and its address.
#[derive(Clone, Debug)]
pub struct Host {
    /// The namespace's name (`rpf<pid>-<name>`).
    pub ns: String,
    /// The host's name in the test.
    pub name: String,
    /// Its address on the switch.
    pub addr: Ipv4Addr,
    /// Its port's index on the switch (`s<index>` there, `h<index>` in the host).
    index: usize,
}

/// Runs `ip args`, panicking with its error text when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().unwrap_or_else(|e| panic!("ip {args:?}: {e} (install iproute2)"));
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr).trim());
}

/// Removes the namespaces of test processes that no longer run.
fn remove_abandoned() {
    let Ok(list) = Command::new("ip").args(["netns", "list"]).output() else { return };
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(pid) = name.strip_prefix("rpf").and_then(|r| r.split('-').next()) else { continue };
        if pid.parse::<u32>().is_ok() && !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

impl Net {
    /// A switch of this process's own, with no host yet.
    ///
    /// # Panics
    /// When namespaces cannot be made (not root, no `ip`): a test that needs them fails.
    pub fn new() -> Net {
        remove_abandoned();
        let prefix = format!("rpf{}", std::process::id());
        let sw = format!("{prefix}-switch");
        ip(&["netns", "add", &sw]);
        ip(&["-n", &sw, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &sw, "link", "set", "br0", "up"]);
        Net { prefix, hosts: vec![sw] }
    }

    fn switch(&self) -> &str {
        &self.hosts[0]
    }

    /// A new host named `name` on the switch, at `10.99.0.<10 + n>` for the n-th host.
    pub fn host(&mut self, name: &str) -> Host {
        let index = self.hosts.len();
        assert!(index < 200, "at most 200 hosts");
        let ns = format!("{}-{name}", self.prefix);
        let (inner, outer) = (format!("h{index}"), format!("s{index}"));
        ip(&["netns", "add", &ns]);
        self.hosts.push(ns.clone());
        ip(&["link", "add", &inner, "netns", &ns, "type", "veth", "peer", "name", &outer, "netns", self.switch()]);
        let addr = Ipv4Addr::new(10, 99, 0, 10 + index as u8);
        ip(&["-n", &ns, "addr", "add", &format!("{addr}/24"), "dev", &inner]);
        ip(&["-n", &ns, "link", "set", &inner, "up"]);
        ip(&["-n", &ns, "link", "set", "lo", "up"]);
        ip(&["-n", self.switch(), "link", "set", &outer, "master", "br0"]);
        ip(&["-n", self.switch(), "link", "set", &outer, "up"]);
        Host { ns, name: name.to_owned(), addr, index }
    }

    /// Cuts the link between `a` and `b` (both directions), or restores it (`cut` false).
    pub fn cut(&self, a: &Host, b: &Host, cut: bool) {
        let verb = if cut { "add" } else { "del" };
        ip(&["-n", &a.ns, "route", verb, "blackhole", &format!("{}/32", b.addr)]);
        ip(&["-n", &b.ns, "route", verb, "blackhole", &format!("{}/32", a.addr)]);
    }

    /// Takes `host` off the switch (its port down: nothing reaches it or leaves it), or puts it
    /// back (`off` false).
    pub fn isolate(&self, host: &Host, off: bool) {
        let state = if off { "down" } else { "up" };
        ip(&["-n", self.switch(), "link", "set", &format!("s{}", host.index), state]);
    }
}

impl Default for Net {
    fn default() -> Net {
        Net::new()
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.hosts.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

impl Host {
    /// `program` to be run inside this host (`ip netns exec <ns> program`; the program keeps the
    /// pid `ip` had, so signalling the child signals it).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.ns, program]);
        c
    }

    /// Moves the calling thread into this host's namespace: its sockets, and those of the
    /// threads and processes it starts afterwards, are the host's.
    ///
    /// # Panics
    /// When the namespace cannot be entered.
    #[allow(unsafe_code)] // one libc call, with no safe wrapper among the workspace's crates
    pub fn enter(&self) {
        use std::os::fd::AsRawFd;
        let file = std::fs::File::open(format!("/run/netns/{}", self.ns)).expect("the namespace's file");
        // SAFETY: setns on a valid descriptor of a network namespace changes only the calling
        // thread's network namespace; the descriptor outlives the call.
        let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(rc, 0, "setns {}: {}", self.ns, std::io::Error::last_os_error());
    }
}
