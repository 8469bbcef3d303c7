import ArgumentParser
import FunctionGateway
import GatewayCommands
import Testing

/// Who a request comes from when proxies stand in front of the gateway (docs/deploy.md#client-address): the header
/// is read from the right, past the trusted proxies, and only when the connection itself is a trusted proxy's.
@Suite("the client's address behind trusted proxies")
struct ClientAddressTests {
    /// Knative's shape: the ingress, the activator and the queue-proxy (on loopback) each append.
    let knative = ClientAddressRule(
        header: "X-Forwarded-For",
        trustedProxies: ["127.0.0.0/8", "::1/128", "10.0.0.0/8"].map { AddressBlock($0)! })

    @Test("behind Knative's chain the client is the first untrusted entry from the right, whatever it wrote itself")
    func knativeChain() {
        // Through the ingress, the activator and the queue-proxy.
        #expect(knative.client(headerLines: ["203.0.113.7, 10.8.0.4, 10.8.1.9"], peer: "127.0.0.1") == "203.0.113.7")
        // Scaled up: the activator is out of the path, one entry fewer; the same client.
        #expect(knative.client(headerLines: ["203.0.113.7, 10.8.0.4"], peer: "127.0.0.1") == "203.0.113.7")
        // What the client wrote itself lies to the left of what the proxies appended: it names no one.
        #expect(
            knative.client(headerLines: ["198.51.100.9, 10.0.0.1, 203.0.113.7, 10.8.0.4"], peer: "127.0.0.1")
                == "203.0.113.7")
        // Two header lines are one list, in order: the last line does not win on its own.
        #expect(
            knative.client(headerLines: ["198.51.100.9", "203.0.113.7, 10.8.0.4, 10.8.1.9"], peer: "127.0.0.1")
                == "203.0.113.7")
        #expect(knative.client(headerLines: ["203.0.113.7", "10.8.0.4"], peer: "127.0.0.1") == "203.0.113.7")
        // A dual-stack listener's mapped loopback is loopback; an address with a port is the address.
        #expect(knative.client(headerLines: ["203.0.113.7:51234, 10.8.0.4"], peer: "::ffff:127.0.0.1") == "203.0.113.7")
        #expect(knative.client(headerLines: ["[2001:db8::7]:443"], peer: "::1") == "2001:db8:0:0:0:0:0:7")
    }

    @Test("from a peer that is not a trusted proxy the header is ignored: a client cannot name itself or a victim")
    func untrustedPeer() {
        #expect(knative.client(headerLines: ["198.51.100.9"], peer: "203.0.113.7") == "203.0.113.7")
        #expect(knative.client(headerLines: ["10.8.0.4"], peer: "203.0.113.7") == "203.0.113.7")
        #expect(knative.client(headerLines: [], peer: "127.0.0.1") == "127.0.0.1")
        #expect(knative.client(headerLines: ["x"], peer: nil) == "unknown")
    }

    @Test("a configured number of hops counts from the right; a chain shorter than that names the nearest proxy")
    func hops() {
        let cloudFront = ClientAddressRule(
            header: "x-forwarded-for", trustedProxies: [AddressBlock("10.0.0.0/8")!], hops: 2)
        #expect(
            cloudFront.client(headerLines: ["198.51.100.9, 203.0.113.7, 10.1.2.3"], peer: "10.9.9.9") == "203.0.113.7")
        #expect(cloudFront.client(headerLines: ["203.0.113.7"], peer: "10.9.9.9") == "10.9.9.9")
        #expect(
            cloudFront.client(headerLines: ["198.51.100.9, 203.0.113.7, 10.1.2.3"], peer: "192.0.2.1") == "192.0.2.1")
    }

    @Test("entries that are not addresses are keys as written (bounded); a chain of trusted proxies names its first")
    func oddEntries() {
        #expect(knative.client(headerLines: ["unknown, 10.8.0.4"], peer: "127.0.0.1") == "unknown")
        let long = String(repeating: "a", count: 500)
        #expect(knative.client(headerLines: [long], peer: "127.0.0.1").count == 64)
        #expect(knative.client(headerLines: ["10.1.1.1, 10.2.2.2"], peer: "127.0.0.1") == "10.1.1.1")
        #expect(knative.client(headerLines: [" , ,"], peer: "127.0.0.1") == "127.0.0.1")
    }

    @Test("addresses and blocks parse as written in forwarding headers and options, and nothing else does")
    func parsing() {
        #expect(IPAddress("192.0.2.1")?.bytes == [192, 0, 2, 1])
        #expect(IPAddress("::ffff:192.0.2.1")?.bytes == [192, 0, 2, 1])
        #expect(IPAddress("2001:db8::1")?.bytes.count == 16)
        #expect(IPAddress("::")?.bytes == Array(repeating: 0, count: 16))
        // Ports come off; leading zeros and upper-case hex read as written; an embedded IPv4 tail is its 4 bytes.
        #expect(IPAddress("192.0.2.1:8080")?.bytes == [192, 0, 2, 1])
        #expect(IPAddress("[::ffff:192.0.2.1]:443")?.bytes == [192, 0, 2, 1])
        #expect(IPAddress("010.0.0.1")?.bytes == [10, 0, 0, 1])
        #expect(IPAddress("2001:DB8::A")?.description == "2001:db8:0:0:0:0:0:a")
        #expect(
            IPAddress("64:ff9b::192.0.2.33")?.bytes == [0, 0x64, 0xff, 0x9b] + Array(repeating: 0, count: 8) + [
                192, 0, 2, 33,
            ])
        #expect(IPAddress("1:2:3:4:5:6:7:8")?.description == "1:2:3:4:5:6:7:8")
        #expect(IPAddress("255.255.255.255")?.description == "255.255.255.255")
        for bad in [
            "", "1.2.3", "1.2.3.4.5", "256.1.1.1", "1.2.3.-4", "::1::2", "1:2:3:4:5:6:7:8:9", "g::1", "[::1", "x",
            "+1::2", "1.2.3.4 ", " 1.2.3.4", "1..2.3", "1.2.3.4:x", "[::1]x", ":::", "12345::1", "1.2.3.0255",
            "::ffff:1.2.3", "１.2.3.4", "[]", "1.2.3.4:5:6",
        ] {
            #expect(IPAddress(bad) == nil, "\(bad)")
        }
        #expect(AddressBlock("10.0.0.0/8")!.contains(IPAddress("10.255.1.2")!))
        #expect(!AddressBlock("10.0.0.0/8")!.contains(IPAddress("11.0.0.1")!))
        #expect(AddressBlock("172.16.0.0/12")!.contains(IPAddress("172.31.255.255")!))
        #expect(!AddressBlock("172.16.0.0/12")!.contains(IPAddress("172.32.0.0")!))
        #expect(AddressBlock("fc00::/7")!.contains(IPAddress("fd12::1")!))
        #expect(!AddressBlock("fc00::/7")!.contains(IPAddress("fe80::1")!))
        #expect(!AddressBlock("::1/128")!.contains(IPAddress("127.0.0.1")!))
        for bad in ["10.0.0.0/33", "10.0.0.0/", "/8", "::/129", "10.0.0.0/8/8"] {
            #expect(AddressBlock(bad) == nil, "\(bad)")
        }
    }

    @Test("the options: a header needs trusted proxies; the runner on loopback does not share one client out")
    func options() throws {
        #expect(throws: (any Error).self) {
            try HTTPLimitOptions.parse(["--client-address-header", "x-forwarded-for"]).limits()
        }
        #expect(throws: (any Error).self) { try HTTPLimitOptions.parse(["--trusted-proxy", "10.0.0.0/8"]).limits() }
        #expect(throws: (any Error).self) {
            try HTTPLimitOptions.parse(["--client-address-header", "x-forwarded-for", "--trusted-proxy", "10/8"])
                .limits()
        }
        let image = try HTTPLimitOptions.parse([
            "--client-address-header", "X-Forwarded-For", "--trusted-proxy", "127.0.0.0/8,::1/128", "--trusted-proxy",
            "10.0.0.0/8",
        ]).limits()
        #expect(image.clientAddress?.trustedProxies.count == 3 && image.clientAddress?.header == "x-forwarded-for")
        #expect(image.maxRequestsPerClient == 16)
        let local = try HTTPLimitOptions.parse([]).limits(developersMachine: true)
        #expect(local.maxRequestsPerClient == local.maxConnections)
        #expect(
            try HTTPLimitOptions.parse(["--max-requests-per-client", "4"]).limits(developersMachine: true)
                .maxRequestsPerClient == 4)
        #expect(ServeOptions.isLoopback("127.0.0.1") && ServeOptions.isLoopback("::1"))
        #expect(!ServeOptions.isLoopback("0.0.0.0") && !ServeOptions.isLoopback("::"))
    }
}
