<?xml version="1.0"?>
<!-- Applied by the libvirt provider before the trial network is defined: the bridge without
     STP. Each trial bridge is one segment with no loop to break; with STP on, the kernel
     keeps a newly attached port (a node's tap) listening and learning for twice its minimum
     forward delay before it forwards a frame, so a node restored from a snapshot would lose
     its first DHCP requests for seconds. -->
<xsl:stylesheet version="1.0" xmlns:xsl="http://www.w3.org/1999/XSL/Transform">
  <xsl:output omit-xml-declaration="yes" indent="yes"/>
  <xsl:template match="node()|@*">
    <xsl:copy><xsl:apply-templates select="node()|@*"/></xsl:copy>
  </xsl:template>
  <xsl:template match="/network/bridge">
    <xsl:copy>
      <xsl:apply-templates select="@*"/>
      <xsl:attribute name="stp">off</xsl:attribute>
      <xsl:attribute name="delay">0</xsl:attribute>
      <xsl:apply-templates select="node()"/>
    </xsl:copy>
  </xsl:template>
</xsl:stylesheet>
