-- Argo CD health of a NIM Operator NIMService (apps.nvidia.com), written by gpuc.
-- Ready is Healthy and Failed is Degraded; Pending and NotReady are a rollout in progress (pods pulling
-- the image, loading the model, or waiting for their GPUs), with the operator's Ready condition as message.
local hs = {status = "Progressing", message = "waiting for the NIM Operator"}
local status = obj.status
if status == nil or status.state == nil then
  return hs
end
-- a condition's message, else its reason (v3.1.2 writes Failed with reason NIMCacheFailed and no message)
local function message(ctype)
  for _, c in ipairs(status.conditions or {}) do
    if c.type == ctype and c.message ~= nil and c.message ~= "" then
      return c.message
    end
  end
  for _, c in ipairs(status.conditions or {}) do
    if c.type == ctype and c.reason ~= nil and c.reason ~= "" then
      return c.reason
    end
  end
  return nil
end
if status.state == "Ready" then
  hs.status = "Healthy"
  hs.message = "ready"
  if status.availableReplicas ~= nil then hs.message = status.availableReplicas .. " replica(s) ready" end
elseif status.state == "Failed" then
  hs.status = "Degraded"
  hs.message = message("Failed") or message("Ready") or "failed"
else
  hs.message = status.state .. ": " .. (message("Ready") or "rolling out")
end
return hs
