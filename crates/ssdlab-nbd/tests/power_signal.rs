//! SIGUSR1 cuts a running server's power (`ssdlab serve`): a client that keeps writing and
//! flushing through the signal reads back every write that a flush acknowledged. Its own test
//! binary, so that the process-wide signal reaches only this server.

mod common;

use common::{pattern, start, Client};
use ssdlab_nbd::protocol::Command;
use std::sync::mpsc;

const WRITES: u64 = 600;
const FLUSH_EVERY: u64 = 5;

#[test]
fn sigusr1_cuts_the_power_and_every_flushed_write_reads_back() {
    let server = start("powersignal", "virtual", |o| o.power_loss_on_signal = true);
    let socket = server.socket.clone();
    let (halfway_tx, halfway_rx) = mpsc::channel();
    let (signalled_tx, signalled_rx) = mpsc::channel::<()>();
    let client = std::thread::spawn(move || {
        let mut c = Client::connect(&socket);
        let mut flushed = 0;
        for i in 0..WRITES {
            if i == WRITES / 3 {
                halfway_tx.send(()).unwrap();
                signalled_rx.recv().unwrap();
            }
            assert_eq!(c.write(i * 4096, &pattern(i, 4096)), 0, "write {i}");
            if (i + 1) % FLUSH_EVERY == 0 {
                assert_eq!(c.command(Command::Flush, 0, 0, 0), 0, "flush after {i}");
                flushed = i + 1;
            }
        }
        (c, flushed)
    });
    halfway_rx.recv().unwrap();
    // SAFETY: kill with this process's id and a signal the server handles.
    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGUSR1) }, 0);
    // Delivery waits for the kernel to run one of the process's threads.
    std::thread::sleep(std::time::Duration::from_millis(100));
    signalled_tx.send(()).unwrap();
    let (mut c, flushed) = client.join().unwrap();
    assert_eq!(flushed, WRITES);
    for i in 0..flushed {
        assert_eq!(
            c.read(i * 4096, 4096).unwrap(),
            pattern(i, 4096),
            "page {i}"
        );
    }
    c.disconnect();
    let s = server.finish();
    let losses = s["emulator"]["power_losses"].as_array().unwrap();
    assert_eq!(losses.len(), 1, "{losses:?}");
    let loss = &losses[0];
    assert_eq!(loss["trigger"], "signal");
    assert_eq!(loss["recovered"], true);
    // The loss came after the first third of the writes: their pages were in flash.
    assert!(loss["at_ns"].as_u64().unwrap() > 0, "{loss}");
    assert!(loss["mapped_units"].as_u64().unwrap() >= WRITES / 3 / FLUSH_EVERY * FLUSH_EVERY);
    assert!(loss["oob_pages_read"].as_u64().unwrap() > 0, "{loss}");
    assert!(loss["recovery_ns"].as_u64().unwrap() > 0, "{loss}");
    assert_eq!(
        s["emulator"]["power_loss"]["mapped_units"],
        loss["mapped_units"]
    );
}
