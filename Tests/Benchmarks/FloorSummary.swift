import Foundation

/// "Down to the floor": every figure of the performance goals in one table, this run's value beside the value
/// measured before the work on them (main at 3146335, the same figures taken from outside the week before) and the
/// goal. The "before" column is history, quoted; every "now" value is measured in this run, in the section named.
struct FloorSummary {
    struct Row {
        let figure: String
        let before: String
        let now: Double?
        let format: String
        let goal: String
        /// Whether `now` meets the goal; `nil` when it was not measured.
        let met: Bool?
        let section: String
    }

    var rows: [Row] = []

    mutating func ratio(
        _ figure: String, before: String, now: Double?, atMost limit: Double, section: String
    ) {
        rows.append(
            Row(
                figure: figure, before: before, now: now, format: "%.2f", goal: String(format: "≤ %.1f", limit),
                met: now.map { $0 <= limit }, section: section))
    }

    mutating func count(
        _ figure: String, before: String, now: Double?, goal: String, met: (Double) -> Bool, section: String
    ) {
        rows.append(
            Row(
                figure: figure, before: before, now: now, format: "%.0f", goal: goal, met: now.map(met),
                section: section))
    }

    var markdown: String {
        var text = """

            ## Down to the floor: the goals in one table

            Each figure of this run against the goals, with what it was before (`before`: main at 3146335, measured
            from outside with the shipped static runtime interleaved with C programs doing the same work, medians;
            quoted, not re-measured). Every other column comes from this run; the section named holds how it was
            measured. The machine is shared: ratios taken in one run move by about ±0.1 between runs.

            | figure | before | now | goal | | measured in |
            |---|---:|---:|---|---|---|

            """
        for row in rows {
            let now = row.now.map { String(format: row.format, $0) } ?? "not measured"
            let verdict = row.met.map { $0 ? "met" : "**missed**" } ?? "—"
            text += "| \(row.figure) | \(row.before) | \(now) | \(row.goal) | \(verdict) | \(row.section) |\n"
        }
        return text
    }
}
