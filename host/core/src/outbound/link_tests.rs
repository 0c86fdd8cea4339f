use super::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A server answering every request read on a connection with `answer`,
/// closing after `per_connection` answers; its count of connections.
async fn serve(answer: &'static [u8], per_connection: usize) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = listener.accept().await {
            counted.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut seen = Vec::new();
                let mut answered = 0;
                while answered < per_connection {
                    let Ok(n) = tcp.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                        seen.drain(..end + 4);
                        if tcp.write_all(answer).await.is_err() {
                            return;
                        }
                        answered += 1;
                    }
                }
            });
        }
    });
    (port, accepted)
}

async fn link(port: u16) -> Link {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    Link::open(Box::new(tcp)).await.unwrap()
}

fn get() -> Request<Full<Bytes>> {
    Request::builder()
        .uri("/x")
        .header("host", "h")
        .body(Full::new(Bytes::new()))
        .unwrap()
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-type: text/plain\r\n\r\nhello";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_carries_one_exchange_after_another_on_its_connection() {
    let (port, accepted) = serve(OK, usize::MAX).await;
    let mut link = link(port).await;
    for _ in 0..3 {
        let answer = link.exchange(get(), 1024).await.unwrap();
        assert_eq!(answer.head.status, 200);
        assert_eq!(answer.body, Bytes::from_static(b"hello"));
        assert!(link.is_open() && link.reused);
    }
    // Chunked, in pieces.
    let (port, _) = serve(
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
        usize::MAX,
    )
    .await;
    let mut chunked = super::Link::open(Box::new(
        TcpStream::connect(("127.0.0.1", port)).await.unwrap(),
    ))
    .await
    .unwrap();
    assert_eq!(chunked.exchange(get(), 1024).await.unwrap().body, "abcde");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_its_peer_closed_gives_the_request_back_or_says_it_broke() {
    let (port, _) = serve(OK, 1).await;
    let mut link = link(port).await;
    assert!(link.exchange(get(), 1024).await.is_ok());
    // The server closed after its one answer.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    match link.exchange(get(), 1024).await {
        Err(Failure::NotSent(request)) => assert_eq!(request.uri(), "/x"),
        Err(Failure::Failed(e)) => assert!(e.is_incomplete_message() || e.is_canceled(), "{e}"),
        Err(Failure::TooLarge { .. }) | Ok(_) => panic!("a closed link answered"),
    }
    assert!(!link.is_open());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_past_the_cap_stops_the_read_and_spends_the_link() {
    let (port, _) = serve(OK, usize::MAX).await;
    let mut link = link(port).await;
    match link.exchange(get(), 4).await {
        Err(Failure::TooLarge { size, limit }) => assert_eq!((size, limit), (5, 4)),
        other => panic!("{:?}", other.map(|a| a.body)),
    }
    assert!(!link.is_open());
    let pool = super::super::pool::Pool::new(2, std::time::Duration::from_secs(60));
    pool.put("http://h", link);
    assert!(pool.take("http://h").is_none(), "a spent link is not kept");
}
