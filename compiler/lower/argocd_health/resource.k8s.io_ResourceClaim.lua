-- Argo CD health of a DRA ResourceClaim (resource.k8s.io), written by gpuc.
-- DRA allocates a claim when the first pod that uses it is scheduled, and gpuc applies claims in an
-- earlier sync wave than the NIMService whose pods use them: an unallocated claim must be Healthy, or
-- the sync would wait forever for a wave that never comes. What is reported is what goes wrong after:
-- a device whose driver says it is not Ready, or a binding condition that failed or is still pending.
local hs = {status = "Healthy", message = "not allocated yet: DRA allocates it when a pod that uses it is scheduled"}
local status = obj.status
if status == nil or status.allocation == nil then
  return hs
end

local function key(d)
  return tostring(d.driver) .. "/" .. tostring(d.pool) .. "/" .. tostring(d.device)
end

local conditions = {}
if status.devices ~= nil then
  for _, d in ipairs(status.devices) do
    conditions[key(d)] = d.conditions or {}
  end
end

local function condition(list, ctype)
  for _, c in ipairs(list) do
    if c.type == ctype then
      return c
    end
  end
  return nil
end

local function why(c)
  local text = c.type
  if c.reason ~= nil and c.reason ~= "" then text = text .. " (" .. c.reason .. ")" end
  if c.message ~= nil and c.message ~= "" then text = text .. ": " .. c.message end
  return text
end

local results = {}
if status.allocation.devices ~= nil and status.allocation.devices.results ~= nil then
  results = status.allocation.devices.results
end
local pending = {}
for _, r in ipairs(results) do
  local list = conditions[key(r)] or {}
  for _, ctype in ipairs(r.bindingFailureConditions or {}) do
    local c = condition(list, ctype)
    if c ~= nil and c.status == "True" then
      hs.status = "Degraded"
      hs.message = "device " .. r.device .. " failed to bind: " .. why(c)
      return hs
    end
  end
  local ready = condition(list, "Ready")
  if ready ~= nil and ready.status == "False" then
    hs.status = "Degraded"
    hs.message = "device " .. r.device .. " is not ready: " .. why(ready)
    return hs
  end
  for _, ctype in ipairs(r.bindingConditions or {}) do
    local c = condition(list, ctype)
    if c == nil or c.status ~= "True" then
      table.insert(pending, r.device .. " (" .. ctype .. ")")
    end
  end
end
if #pending > 0 then
  hs.status = "Progressing"
  hs.message = "waiting for devices to bind: " .. table.concat(pending, ", ")
  return hs
end

local consumers = 0
if status.reservedFor ~= nil then consumers = #status.reservedFor end
local devices = {}
for _, r in ipairs(results) do table.insert(devices, r.device) end
hs.message = "allocated " .. #devices .. " device(s) (" .. table.concat(devices, ", ") .. "), reserved for "
  .. consumers .. " consumer(s)"
return hs
