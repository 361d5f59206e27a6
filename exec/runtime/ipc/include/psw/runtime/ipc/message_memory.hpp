#pragma once
// How the processes that send or receive tensors over gRPC use the C library's heap.
//
// Note [Message memory]
// ~~~~~~~~~~~~~~~~~~~~~
// A request with raw input carries megabytes (ResNet-152's 8 images: 4.8 MB; Inception-v3's:
// 8.6 MB), and each side allocates buffers of that size per request: the client its message
// and the serialized bytes, the server the received bytes and the parsed message. glibc's
// malloc serves them from a per-thread arena and, by default, hands freed memory back to the
// kernel once the free space at the top of a heap passes a threshold that itself moves with
// the sizes seen (and serves the largest blocks from fresh mmaps). A buffer in memory the
// kernel took back costs a page fault per 4 KiB page when it is written again: counted here on
// the host, 2,370 faults per ResNet-152 request on each new client thread and 4,200 for an
// Inception-v3 request on a thread that had seen ResNet-152's only, until each thread's arena
// has grown to both sizes; the server's threads the same. On the H200's virtual machine a page
// fault costs microseconds, so that psw load's 16 sender threads paid 9.5-10.9 ms of protocol
// for ResNet-152 where psw profile-serving's one thread, its arena warm, paid 5.0-5.2 ms, on
// the same server (gpu-serve.sh part `protocol`, results/gpu/2026-12-02-h200-serve-protocol-
// before.md); the connections made no difference (16 senders on one connection: 10.5 ms).
//
// keep_message_memory() makes the heap keep what it got: one arena for every thread (a few
// large allocations per request contend for nothing), blocks up to 32 MiB from the heap rather
// than from mmaps, and freed memory kept up to 1 GiB at the top of the heap. After the first
// request of each size, no thread's request faults again (host: every request after the
// second had 0 client faults with four senders, against 4,200 per request before). The cost
// is memory the process keeps: at most what its largest requests in flight at once used.
// On the H200 (results/gpu/2026-12-02-h200-serve-protocol.md, another machine of the kind):
// psw load's 16 senders paid 4.9 ms for ResNet-152 and 7.9 ms for Inception-v3 (10.9 and 14.6
// before), within 0.8 ms of profile-serving, whose own figures fell too (4.2 and 7.3 ms).
// psw runs it for the commands that serve or send requests (serve, client, load, validate,
// bench-serve, profile-serving), before any thread starts; not for the simulator, whose sweep
// threads allocate small and often and would contend in one arena.

namespace psw::runtime {

// Note [Message memory]. Returns false where the C library is not glibc (nothing is changed)
// or refuses a setting.
bool keep_message_memory();

}  // namespace psw::runtime
