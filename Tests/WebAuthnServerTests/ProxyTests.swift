import Foundation
import Testing
import WebAuthnCore
import _WebAuthnEncoding
import _WebAuthnCrypto
import _WebAuthnHTTP
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `https` fetches through an egress proxy (`HTTPS_PROXY`, `NO_PROXY`): the setting as curl reads
/// it, the tunnel (`CONNECT`, then TLS to the endpoint inside it, verified as without a proxy),
/// and every way a proxy can refuse or misbehave.
@Suite("Fetches through an HTTP proxy")
struct ProxyTests {
    @Test("HTTPS_PROXY and NO_PROXY are read as curl reads them; a setting this client cannot use is an error, never a direct connection")
    func environment() throws {
        #expect(try CappedHTTP.Proxy.fromEnvironment([:]) == nil)
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": " "]) == nil)
        let plain = try #require(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "http://proxy.corp:3128"]))
        #expect(plain.host == "proxy.corp" && plain.port == 3128 && plain.authorization == nil && plain.bypass.isEmpty)
        #expect(try CappedHTTP.Proxy.fromEnvironment(["https_proxy": "proxy.corp:8080/"])?.port == 8080)
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "http://[fd00::1]:3128"])?.host == "fd00::1")
        // Credentials: percent-decoded, sent as Basic, never shown.
        let withUser = try #require(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "http://al%40ice:p%3Ass@proxy:3128"]))
        #expect(withUser.authorization == "Basic " + Data("al@ice:p:ss".utf8).base64EncodedString())
        #expect(withUser.description == "proxy:3128")
        for bad in [
            "https://proxy:3128", "socks5://proxy:1080", "http://proxy", "http://proxy:0", "http://proxy:3128/path", "http://:3128", "http://proxy:3128?x=1",
        ] {
            #expect(throws: WebAuthnError.self, "\(bad)") { try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": bad]) }
        }
        // NO_PROXY: names and their sub-domains, leading dots and ports ignored; loopback always direct.
        let proxy = try #require(
            try CappedHTTP.Proxy.fromEnvironment([
                "HTTPS_PROXY": "proxy:3128", "NO_PROXY": " internal.example, .corp.example:443,*.lan,10.1.2.3,[fd00::5]:443,",
            ]))
        #expect(proxy.bypass == ["internal.example", "corp.example", "lan", "10.1.2.3", "fd00::5"])
        for direct in [
            "internal.example", "a.internal.example", "corp.example", "x.corp.example", "printer.lan", "10.1.2.3", "[fd00::5]", "localhost", "127.0.0.1", "::1",
            "app.localhost",
        ] {
            #expect(!proxy.applies(to: direct), "\(direct)")
        }
        for proxied in ["mds3.fidoalliance.org", "appleid.apple.com", "notinternal.example", "internal.example.com", "10.1.2.30", "lan.example"] {
            #expect(proxy.applies(to: proxied), "\(proxied)")
        }
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "proxy:3128", "no_proxy": "*"])?.applies(to: "appleid.apple.com") == false)
        // Addresses and CIDR ranges (curl 7.86): they match address literals, compared as addresses;
        // a malformed range is ignored, never taken for "all".
        let ranges = try #require(
            try CappedHTTP.Proxy.fromEnvironment([
                "HTTPS_PROXY": "proxy:3128",
                "NO_PROXY": "10.0.0.0/8, 192.168.1.128/25, fd00::/8, 2001:db8::1, 172.16.0.0/33, 1.2.3.4/x, 10.0.0.0/, /8, fe80::/129, 100.64.0.0/0x1",
            ]))
        #expect(ranges.bypassRanges.count == 4, "\(ranges.bypassRanges)")
        for direct in ["10.0.0.1", "10.255.255.255", "192.168.1.128", "192.168.1.255", "fd12:3456::1", "[fdff::]", "2001:db8:0::1", "2001:DB8::1"] {
            #expect(!ranges.applies(to: direct), "\(direct)")
        }
        for proxied in ["11.0.0.1", "192.168.1.127", "fe80::1", "2001:db8::2", "172.16.0.1", "1.2.3.4", "100.64.0.1", "10.example", "fd00.example"] {
            #expect(ranges.applies(to: proxied), "\(proxied)")
        }
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "p:1", "NO_PROXY": "0.0.0.0/0"])?.applies(to: "8.8.8.8") == false)
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "p:1", "NO_PROXY": "0.0.0.0/0"])?.applies(to: "::1.2.3.4") == true)
        // As curl: the lower-case name first, and an empty value is unset (HTTPS_PROXY="" with https_proxy set went direct).
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "", "https_proxy": "lower:1"])?.host == "lower")
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "upper:1", "https_proxy": "lower:1"])?.host == "lower")
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "upper:1", "https_proxy": " "])?.host == "upper")
        #expect(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "p:1", "NO_PROXY": "", "no_proxy": "x.example"])?.bypass == ["x.example"])
    }

    /// The stand-in's CA, and a fetch of `url` through `proxy` trusting it.
    static func fetch(_ url: URL, through proxy: CappedHTTP.Proxy?, identity: MetadataStandIn.TLSIdentity) async -> Result<CappedHTTP.Response, WebAuthnError> {
        let ca = try! X509Certificate(pem: identity.authority.pem)
        do throws(WebAuthnError) {
            return .success(
                try await CappedHTTP.send(
                    URLRequest(url: url), maxBytes: 1 << 20, timeout: 5, roots: [ca], proxy: .success(proxy), failure: .metadataUnavailable))
        } catch { return .failure(error) }
    }

    @Test("through the tunnel: CONNECT names the endpoint, the proxy's credentials go to the proxy only, and TLS is verified against the endpoint's name")
    func tunnel() async throws {
        let identity = MetadataStandIn.TLSIdentity.loopback
        let body = Array("the blob".utf8)
        let server = try MetadataStandIn(tls: identity) { _ in .respond(status: 200, headers: [], body: body) }
        defer { server.stop() }
        let proxy = try ConnectProxy(authorization: "Basic " + Data("user:secret".utf8).base64EncodedString())
        defer { proxy.stop() }
        var setting = try #require(try CappedHTTP.Proxy.fromEnvironment(["HTTPS_PROXY": "http://user:secret@127.0.0.1:\(proxy.port)"]))
        setting = CappedHTTP.Proxy(host: setting.host, port: setting.port, authorization: setting.authorization, proxiesLoopback: true)
        let url = URL(string: "https://localhost:\(server.port)/blob")!
        let response = try await Self.fetch(url, through: setting, identity: identity).get()
        #expect(response.status == 200 && response.body == body)
        let head = try #require(proxy.heads.first)
        #expect(head.hasPrefix("CONNECT localhost:\(server.port) HTTP/1.1\r\n"))
        #expect(head.contains("Proxy-Authorization: Basic "))
        // The endpoint got the request itself, without the proxy's credentials.
        #expect(server.requests.count == 1 && server.requests.first?.path == "/blob")
        #expect(server.requests.first?.header("Proxy-Authorization") == nil)
        // Without the credentials: the proxy's 407, named as such, and no request reached the endpoint.
        let anonymous = CappedHTTP.Proxy(host: "127.0.0.1", port: proxy.port, proxiesLoopback: true)
        guard case .failure(let refused) = await Self.fetch(url, through: anonymous, identity: identity) else {
            Issue.record("a tunnel without the proxy's credentials succeeded")
            return
        }
        #expect(
            refused.code == .metadataUnavailable && refused.message.contains("407") && refused.message.contains("proxy authentication"), "\(refused.message)")
        #expect(server.requests.count == 1)
        // Loopback is fetched directly unless the proxy is told otherwise: the proxy sees nothing more.
        let direct = CappedHTTP.Proxy(host: "127.0.0.1", port: proxy.port)
        #expect(try await Self.fetch(url, through: direct, identity: identity).get().status == 200)
        #expect(proxy.heads.count == 2 && server.requests.count == 2)
    }

    @Test(
        "a proxy that refuses, sends data before the tunnel, or is not there fails the fetch with the caller's code; a malformed setting fails it before any connection"
    )
    func proxyFailures() async throws {
        let identity = MetadataStandIn.TLSIdentity.loopback
        let server = try MetadataStandIn(tls: identity) { _ in .respond(status: 200, headers: [], body: [1]) }
        defer { server.stop() }
        let url = URL(string: "https://localhost:\(server.port)/")!
        // A head at the 64 KiB limit is read (its 403 is reported); one past it, or one that never
        // ends, is refused there.
        let filler = { (status: Int, count: Int) in Array("HTTP/1.1 \(status) X\r\nX: ".utf8) + [UInt8](repeating: 0x61, count: count) }
        let end = Array("\r\n\r\n".utf8)
        for (mode, expected) in [
            (ConnectProxy.Mode.refuse(403), "403"), (.refuse(502), "502"), (.dataAfterHead, "before the tunnel"),
            (.raw(filler(403, 64 * 1024 - 23) + end), "with 403"), (.raw(filler(200, 64 * 1024) + end), "over 65536 bytes"),
            (.raw(filler(200, 1 << 20)), "over 65536 bytes"), (.raw(Array("HTTP/1.1 200 OK\r\nX: y".utf8)), "closed the connection"),
            (.raw(Array("SSH-2.0-x\r\n\r\n".utf8)), "not HTTP/1.x"),
        ] {
            let proxy = try ConnectProxy(mode: mode)
            defer { proxy.stop() }
            let result = await Self.fetch(url, through: CappedHTTP.Proxy(host: "127.0.0.1", port: proxy.port, proxiesLoopback: true), identity: identity)
            guard case .failure(let error) = result else {
                Issue.record("\(mode): fetched")
                continue
            }
            #expect(error.code == .metadataUnavailable && error.message.contains(expected), "\(mode): \(error.message)")
        }
        #expect(server.requests.isEmpty)
        // Nothing listens on the proxy's port.
        let gone = try ConnectProxy()
        let port = gone.port
        gone.stop()
        let unreachable = await Self.fetch(url, through: CappedHTTP.Proxy(host: "127.0.0.1", port: port, proxiesLoopback: true), identity: identity)
        #expect((try? unreachable.get()) == nil)
        // A setting that cannot be used: the caller's code and the reason, and no connection at all.
        let malformed = WebAuthnError(.configurationInvalid, "HTTPS_PROXY names no port")
        do {
            _ = try await CappedHTTP.send(URLRequest(url: url), maxBytes: 16, timeout: 5, proxy: .failure(malformed), failure: .appleEndpointUnavailable)
            Issue.record("fetched with a malformed proxy setting")
        } catch {
            #expect(error.code == .appleEndpointUnavailable && error.message.contains("HTTPS_PROXY"))
        }
        #expect(server.requests.isEmpty)
    }

    @Test("a redirect from a public endpoint to a private address, in any form the resolver reads, or to a local name is refused through the proxy too")
    func privateLiterals() {
        // Red team, twelfth pass: legacy IPv4 forms and IPv4-compatible IPv6 passed for public.
        for literal in [
            "10.0.0.5", "127.0.0.1", "169.254.169.254", "192.168.1.1", "::1", "fd00::1", "fe80::1", "::ffff:10.0.0.1", "127.1", "2130706433",
            "0x7f000001", "::127.0.0.1", "::10.0.0.1",
        ] {
            #expect(CappedHTTP.isNonPublicLiteral(literal), "\(literal)")
        }
        for other in ["8.8.8.8", "2606:4700::1111", "mds3.fidoalliance.org", "10.0.0.5.nip.io"] {
            #expect(!CappedHTTP.isNonPublicLiteral(other), "\(other)")
        }
        // Names the proxy would resolve inside the network.
        for local in ["vm", "intranet", "localhost", "host.2130706433", "a.0x7f", "vm."] { #expect(!CappedHTTP.isPublicName(local), "\(local)") }
        for name in ["mds.fidoalliance.org", "appleid.apple.com", "mds.fidoalliance.org.", "xn--bcher-kva.example"] {
            #expect(CappedHTTP.isPublicName(name), "\(name)")
        }
    }

    @Test("a host is a DNS name or an IP address, nothing else: no CR, space, NUL or other byte reaches a socket or the proxy's CONNECT line")
    func hosts() async throws {
        for good in ["mds.fidoalliance.org", "localhost", "a-b.c1.example.", "127.0.0.1", "::1", "2001:db8::1", String(repeating: "a", count: 63) + ".com"] {
            #expect(CappedHTTP.isValidHost(good), "\(good)")
        }
        for bad in [
            "", ".", "a..b", "-a.com", "a-.com", "a b.com", "a\rb.com", "a\r\nX: y", "a\u{0}.evil", "a\tb", "é.com", "a_b.com", "a/b", "a:b",
            String(repeating: "a", count: 64) + ".com", String(repeating: "a.", count: 127) + "aa",
        ] {
            #expect(!CappedHTTP.isValidHost(bad), "\(bad.debugDescription)")
        }
        // Red team, twelfth pass: a redirect's host, percent-decoded, put a bare CR into the CONNECT line.
        let identity = MetadataStandIn.TLSIdentity.loopback
        let server = try MetadataStandIn(tls: identity) { _ in
            .respond(status: 302, headers: [("Location", "https://localhost%0DX-Injected:1/")], body: [])
        }
        defer { server.stop() }
        let proxy = try ConnectProxy()
        defer { proxy.stop() }
        let ca = try X509Certificate(pem: identity.authority.pem)
        do {
            _ = try await CappedHTTP.send(
                URLRequest(url: URL(string: "https://localhost:\(server.port)/")!), maxBytes: 1 << 16, timeout: 5, redirects: .httpsOnly, roots: [ca],
                proxy: .success(CappedHTTP.Proxy(host: "127.0.0.1", port: proxy.port, proxiesLoopback: true)), failure: .metadataUnavailable)
            Issue.record("the redirect was followed")
        } catch {
            #expect(error.message.contains("not a DNS name"), "\(error.message)")
        }
        #expect(proxy.heads.count == 1 && !proxy.heads.joined().contains("X-Injected"), "\(proxy.heads)")
    }
}
