-- `make soak`'s wrk phase: push-register with a new device token per request, as one caregiver
-- (CAREGIVER_TOKEN from the environment). Prints the figures scripts/soak.sh checks.
local threads = {}

function setup(thread)
    thread:set("id", #threads + 1)
    table.insert(threads, thread)
end

function init(args)
    counter = 0
    statuses = {}
    bearer = "Bearer " .. os.getenv("CAREGIVER_TOKEN")
end

function request()
    counter = counter + 1
    local body = string.format('{"token":"wrk-%d-%d","platform":"ios","environment":"DEV"}', id, counter)
    return wrk.format("POST", "/api/push/register",
        { ["content-type"] = "application/json", ["authorization"] = bearer }, body)
end

function response(status, headers, body)
    statuses[status] = (statuses[status] or 0) + 1
end

function done(summary, latency, requests)
    local ok, other = 0, 0
    for _, thread in ipairs(threads) do
        local counts = thread:get("statuses")
        for status, count in pairs(counts) do
            if status == 200 then ok = ok + count else other = other + count end
        end
    end
    io.write(string.format("wrk: requests=%d ok=%d non200=%d socket_errors=%d p50_ms=%.2f p99_ms=%.2f rps=%.0f\n",
        summary.requests, ok, other,
        summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout,
        latency:percentile(50) / 1000, latency:percentile(99) / 1000, summary.requests / (summary.duration / 1e6)))
end
