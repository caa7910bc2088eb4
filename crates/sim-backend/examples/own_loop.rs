//! An engine that keeps its own event loop and imports only the policy.
//!
//! The C++ engines railwatch comes from run one monitor thread with their
//! own epoll over every device's async fd. This example is that thread, in
//! Rust, with no mio and no `Monitor`: it waits on its own epoll set
//! (edge-triggered), drains each ready fd to `EAGAIN` itself, and hands
//! what it reads, the answers to the machine's questions and the time to
//! `railwatch_core::Machine`, which holds every policy decision.
//!
//! The devices are the simulator's (real non-blocking pipes), scripted from
//! another thread: port 1 of `mlx5_0` goes down, comes back with its
//! `PORT_ACTIVE` queued behind 64 `COMM_EST`, goes down again, and comes
//! back silently (the `PORT_ACTIVE` is lost), so the machine's tick must
//! find it. Run with `cargo run -p railwatch-sim-backend --example own_loop`.

use std::io;
use std::time::{Duration, Instant};

use railwatch_core::{
    Action, AsyncEvent, Errno, EventKind, Happening, Machine, MachineConfig, Millis, Notification, ObjectHandle,
    RailState, RecoveredBy, VerbsPort,
};
use railwatch_sim_backend::{PortSpec, SimDevice};
use rustix::event::epoll;

/// The engine's view of one opened device.
struct Engine {
    machine: Machine,
    devices: Vec<SimDevice>,
    epoll: std::os::fd::OwnedFd,
    /// The engine keeps its own duplicates of the fds it waits on.
    watched: Vec<Option<std::os::fd::OwnedFd>>,
    started: Instant,
    /// What the machine told subscribers, kept for the checks at the end.
    notes: Vec<Notification>,
}

fn errno(e: &io::Error) -> Errno {
    Errno(e.raw_os_error().unwrap_or(-1))
}

impl Engine {
    fn now(&self) -> Millis {
        Millis(self.started.elapsed().as_millis() as u64)
    }

    /// Carries out what the machine asks, answering each question at once.
    fn carry_out(&mut self, now: Millis) -> io::Result<()> {
        while let Some(action) = self.machine.poll_action() {
            match action {
                Action::StartReading { device } => {
                    let fd = self.devices[device as usize].try_clone_async_fd()?;
                    let flags = epoll::EventFlags::IN | epoll::EventFlags::ET;
                    epoll::add(&self.epoll, &fd, epoll::EventData::new_u64(u64::from(device)), flags)?;
                    self.watched[device as usize] = Some(fd);
                }
                Action::StopReading { device } => {
                    if let Some(fd) = self.watched[device as usize].take() {
                        epoll::delete(&self.epoll, &fd)?;
                    }
                }
                Action::Close { device } => self.devices[device as usize].close(),
                // This engine opens its devices itself (add_device) and never
                // hands the machine a device list, so it is never asked to
                // open one; an engine that follows hotplug opens it by name.
                Action::Open { device } => self.machine.handle_opened(device, Err(Errno(19)), now),
                Action::Reopen { device } => {
                    let r = self.devices[device as usize].reopen().map_err(|e| errno(&e));
                    self.machine.handle_reopen(device, r, now);
                }
                // Only with `device_owner = engine`, which this engine leaves
                // at railwatch: it would check its own context here.
                Action::Revalidate { device, .. } => self.machine.handle_reopen(device, Err(Errno(19)), now),
                Action::QueryPort { device, port } => {
                    let r = self.devices[device as usize].port_state(port).map_err(|e| errno(&e));
                    self.machine.handle_port_state(device, port, r, now);
                }
                Action::ReadAddress { device, port } => {
                    let r = self.devices[device as usize].address(port);
                    self.machine.handle_address(device, port, r.as_ref().map_err(errno), now);
                }
                Action::ReadCounters { device, port } => {
                    let r = self.devices[device as usize].flap_counters(port).map_err(|e| errno(&e));
                    self.machine.handle_counters(device, port, r, now);
                }
                Action::ReadLink { device, port } => {
                    let r = self.devices[device as usize].link(port).map_err(|e| errno(&e));
                    self.machine.handle_link(device, port, r, now);
                }
                // A real engine tells its rail selector here.
                Action::SetAvailable { rail, available } => println!("  selector: {rail} available={available}"),
                Action::Reseed { rail, rate } => println!("  selector: {rail} rate {rate}"),
                Action::Notify(note) => self.notes.push(note),
                Action::Log(line) => println!("  log: {line:?}"),
            }
        }
        Ok(())
    }

    /// One turn of the engine's monitor thread: wait (at most until the
    /// machine's next deadline), drain every ready fd to EAGAIN, hand the
    /// machine the time.
    fn turn(&mut self, at_most: Duration) -> io::Result<()> {
        let now = self.now();
        let wait = match self.machine.poll_timeout() {
            Some(deadline) => at_most.min(Duration::from_millis(deadline.since(now))),
            None => at_most,
        };
        let timeout = rustix::event::Timespec { tv_sec: wait.as_secs() as i64, tv_nsec: wait.subsec_nanos() as _ };
        let mut buf = [std::mem::MaybeUninit::<epoll::Event>::uninit(); 8];
        let ready = match epoll::wait(&self.epoll, &mut buf, Some(&timeout)) {
            Ok((ready, _)) => ready.to_vec(),
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        };
        for ev in ready {
            let device = ev.data.u64() as u32;
            // Edge-triggered: read until EAGAIN, or what is queued behind
            // the first event (a PORT_ACTIVE behind COMM_ESTs) is stranded.
            loop {
                let now = self.now();
                match self.devices[device as usize].get_event() {
                    Ok(event) => {
                        self.machine.handle_event(device, event, now);
                        self.carry_out(now)?;
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => {
                        self.machine.handle_read_error(device, errno(&e), now);
                        self.carry_out(now)?;
                        break;
                    }
                }
            }
        }
        let now = self.now();
        self.machine.handle_timeout(now);
        self.carry_out(now)
    }

    fn run_until(&mut self, what: &str, done: impl Fn(&Engine) -> bool) -> io::Result<()> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(self) {
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("timed out waiting for {what}")));
            }
            self.turn(Duration::from_millis(20))?;
        }
        Ok(())
    }
}

fn main() -> io::Result<()> {
    let mlx5_0 = SimDevice::new("mlx5_0", &[PortSpec::active(1), PortSpec::active(2)])?;
    let script = mlx5_0.handle();
    // A short tick so the silent recovery shows quickly (default 1 s).
    let config = MachineConfig { tick_ms: 100, ..MachineConfig::default() };
    let machine = Machine::new(config).map_err(io::Error::other)?;
    let mut engine = Engine {
        machine,
        devices: vec![mlx5_0],
        epoll: epoll::create(epoll::CreateFlags::CLOEXEC)?,
        watched: vec![None],
        started: Instant::now(),
        notes: Vec::new(),
    };
    let now = engine.now();
    let dev = engine.machine.add_device("mlx5_0", &[1, 2], now).expect("the first device");
    engine.carry_out(now)?;
    let gate = engine.machine.gate_of("mlx5_0/1").expect("the machine knows its rail");
    let state = |e: &Engine| e.machine.rail(railwatch_core::RailId { device: dev, port: 1 }).map(|r| r.word.state);
    println!("attached: mlx5_0/1 {:?}", gate.word().state);

    println!("port 1 down");
    script.port_down(1);
    engine.run_until("the pause", |e| state(e) == Some(RailState::Paused))?;
    println!("gate refuses: {}", gate.check().unwrap_err());

    println!("port 1 up, its PORT_ACTIVE queued behind 64 COMM_EST");
    script.queue(AsyncEvent::new(4, railwatch_core::Element::Object(ObjectHandle(7))), 64);
    script.set_port_state_with_event(1, railwatch_core::PortState::Active, EventKind::PortActive);
    engine.run_until("recovery by the event", |e| state(e) == Some(RailState::Active))?;

    println!("port 1 down again, and back with the PORT_ACTIVE lost");
    script.port_down(1);
    engine.run_until("the second pause", |e| state(e) == Some(RailState::Paused))?;
    script.set_port_state(1, railwatch_core::PortState::Active);
    engine.run_until("recovery by the tick", |e| state(e) == Some(RailState::Active))?;

    let recoveries: Vec<RecoveredBy> = engine
        .notes
        .iter()
        .filter_map(|n| match n.what {
            Happening::Transition { to: RailState::Active, cause: railwatch_core::Cause::By(by), .. } => Some(by),
            _ => None,
        })
        .collect();
    println!("recoveries of mlx5_0/1 and mlx5_0/2: {recoveries:?}; gate admits at {:?}", gate.check());
    let want = [RecoveredBy::Attach, RecoveredBy::Attach, RecoveredBy::Event, RecoveredBy::Poll];
    if recoveries != want || gate.check().is_err() {
        return Err(io::Error::other(format!("expected recoveries {want:?}")));
    }
    let stats = engine.machine.device(dev).expect("device").stats;
    println!(
        "machine counted {} events ({} COMM_EST), {} port queries",
        stats.events, stats.comm_est, stats.port_queries
    );
    Ok(())
}
