import Codecs
import FoundationEssentials
import Testing

@Suite("UUID(exactly:) reads the bytes itself")
struct ExactUUIDTests {
    @Test("every UUID's text, in either case, gives the UUID that Foundation's parser gives")
    func sameAsFoundation() {
        for _ in 0..<5_000 {
            let uuid = UUID()
            for text in [uuid.uuidString, uuid.uuidString.lowercased()] {
                #expect(UUID(exactly: text) == uuid, "\(text)")
                #expect(UUID(exactly: text) == UUID(uuidString: text), "\(text)")
            }
        }
        let mixed = "6F1c2A4e-8D3b-4C5a-9E7f-0A1b2C3d4E5f"
        #expect(UUID(exactly: mixed) == UUID(uuidString: mixed))
        #expect(
            UUID(exactly: "00000000-0000-0000-0000-000000000000")
                == UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)))
        #expect(
            UUID(exactly: "ffffffff-ffff-ffff-ffff-ffffffffffff")?.uuidString == "FFFFFFFF-FFFF-FFFF-FFFF-FFFFFFFFFFFF")
    }

    @Test("anything but the 36 characters of the grammar is refused")
    func refusesTheRest() {
        let text = "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5f"
        for bad in [
            text + "\u{0}x", text + "\u{0}", "\u{0}" + text, text + " ", " " + text, "{\(text)}",
            String(text.dropLast()),
            text + "0", text.replacingOccurrences(of: "-", with: ""),
            text.replacingOccurrences(of: "6f1c", with: "6g1c"),
            text.replacingOccurrences(of: "-8d3b", with: "8-d3b"), "", "6f1c2a4e-8d3b-4c5a-9e7f-0a1b2c3d4e5é",
        ] {
            #expect(UUID(exactly: bad) == nil, "\(bad)")
        }
    }

    @Test(
        "a random UUID is version 4 with RFC 9562's variant, its bits otherwise the generator's; never the same twice")
    func random() {
        var seen = Set<UUID>()
        for _ in 0..<10_000 {
            let uuid = UUID.random()
            #expect(uuid.uuid.6 >> 4 == 4 && uuid.uuid.8 >> 6 == 0b10, "\(uuid)")
            seen.insert(uuid)
        }
        #expect(seen.count == 10_000)
        let all = UUID.random(high: .max, low: .max)
        #expect(all.uuidString == "FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF")
        let none = UUID.random(high: 0, low: 0)
        #expect(none.uuidString == "00000000-0000-4000-8000-000000000000")
        let pattern = UUID.random(high: 0x0123_4567_89AB_CDEF, low: 0xFEDC_BA98_7654_3210)
        #expect(pattern.uuidString == "01234567-89AB-4DEF-BEDC-BA9876543210")
    }

    @Test("the lower-case text is Foundation's text lower-cased, for any UUID")
    func lowercasedText() {
        for _ in 0..<5_000 {
            let uuid = UUID()
            #expect(uuid.lowercasedText == uuid.uuidString.lowercased())
        }
        #expect(
            UUID(uuid: (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)).lowercasedText
                == "00000000-0000-0000-0000-000000000000")
    }
}
