-- Argo CD health of an Argo CD Application (argoproj.io), written by gpuc: the Application's own health.
-- Argo CD stopped assessing Applications in 1.8 (argoproj/argo-cd#3781), so an app-of-apps syncs every child at
-- once and their sync waves do nothing; operator-manual/health.md restores it with this check. gpuc's
-- Applications rely on it: the charts (wave 0) are Healthy before the rendered tree (wave 1) applies, so gpuc's
-- DeviceClasses come after the chart's (a later class with the same extendedResourceName would take it over).
local hs = {status = "Progressing", message = ""}
if obj.status ~= nil and obj.status.health ~= nil then
  hs.status = obj.status.health.status
  if obj.status.health.message ~= nil then
    hs.message = obj.status.health.message
  end
end
return hs
